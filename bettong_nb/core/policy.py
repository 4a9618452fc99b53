"""A course policy: rules an administrator sets once for every kernel, and the exam lock.

    # /etc/jupyter/bettong_nb_policy.json (any `jupyter --paths` config folder), or BETTONG_NB_POLICY
    {"allowed_providers": ["openai"], "allowed_models": ["course-model"],
     "disallowed_capabilities": ["shell", "python"], "token_budget": {"session": 50000},
     "approvals_required": true, "locked_folders": ["/home/jovyan/exams"]}

    bettong_nb.policy.current()      # the rules in force and the file each came from, or None

Every file found counts, and they merge most-restrictively: the one BETTONG_NB_POLICY names and
each ``bettong_nb_policy.json`` in ``jupyter_config_path()`` order (JUPYTER_CONFIG_DIR,
JUPYTER_CONFIG_PATH, the user's, the environment's, the system's). So a file added later (in a
student's ~/.jupyter, or through the variable) can only tighten the rules, never loosen them:
allow-lists intersect, disallowed capabilities and locked folders add up, a budget is the
smallest, approvals are required when any file requires them.

The run's start (:func:`admit`, called by the core loop) refuses a run that breaks a rule with
:class:`PolicyError`, one line naming the file and the rule. A notebook whose metadata holds
``"bettong_nb": {"agent": "off"}``, or that lies under a locked folder, refuses every run
started from it (the exam lock). This is a guardrail in the student's own kernel, not a
security boundary: keys and money are enforced at the course gateway.
"""

from __future__ import annotations

import json
import functools
import os
import stat
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import UserError
from . import approvals, kernel
from .usage import Usage, cost, money

__all__ = ["PolicyError", "Policy", "FILENAME", "ENV", "files", "load", "current", "admit", "notebook_path",
           "notebook_lock", "install_notebook", "reset_spending"]

FILENAME = "bettong_nb_policy.json"
ENV = "BETTONG_NB_POLICY"
SCOPES = ("session", "kernel")


class PolicyError(UserError, PermissionError):
    """A run the course policy (or the notebook's exam lock) does not allow."""


def _names(key: str, value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"{where}: {key} must be a list of non-empty strings, got {json.dumps(value)}")
    return tuple(value)


def _limits(key: str, value: Any, where: str, kind: type) -> dict[str, float]:
    if not isinstance(value, dict) or not value or set(value) - set(SCOPES):
        raise PolicyError(f"{where}: {key} must be an object with \"session\" and/or \"kernel\", "
                          f"got {json.dumps(value)}")
    for scope, limit in value.items():
        if isinstance(limit, bool) or not isinstance(limit, kind) or limit < 0:
            raise PolicyError(f"{where}: {key}.{scope} must be a non-negative "
                              f"{'integer' if kind is int else 'number'}, got {json.dumps(limit)}")
    return dict(value)


@dataclass(frozen=True)
class Policy:
    """The rules in force; ``sources`` says which file each rule came from (key -> paths)."""

    allowed_providers: tuple[str, ...] | None = None
    allowed_base_urls: tuple[str, ...] | None = None
    allowed_models: tuple[str, ...] | None = None
    disallowed_capabilities: tuple[str, ...] = ()
    token_budget: Mapping[str, int] = field(default_factory=dict)
    cost_budget: Mapping[str, float] = field(default_factory=dict)
    approvals_required: bool = False
    locked_folders: tuple[str, ...] = ()
    message: str | None = None
    sources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def where(self, key: str) -> str:
        return " + ".join(self.sources.get(key, ())) or "the course policy"

    def refuse(self, key: str, why: str) -> PolicyError:
        note = f" {self.message}" if self.message else ""
        return PolicyError(f"{why} (course policy {self.where(key)}: {key}).{note}")

    def merged(self, other: "Policy") -> "Policy":
        """Both policies at once, the stricter rule winning each key."""
        def meet(a, b):
            return a if b is None else b if a is None else tuple(x for x in a if x in b)

        def least(a, b):
            return {s: min(v for v in (a.get(s), b.get(s)) if v is not None) for s in SCOPES if s in a or s in b}

        sources = {k: tuple(dict.fromkeys((*self.sources.get(k, ()), *other.sources.get(k, ()))))
                   for k in {*self.sources, *other.sources}}
        return Policy(meet(self.allowed_providers, other.allowed_providers),
                      meet(self.allowed_base_urls, other.allowed_base_urls),
                      meet(self.allowed_models, other.allowed_models),
                      tuple(dict.fromkeys((*self.disallowed_capabilities, *other.disallowed_capabilities))),
                      least(self.token_budget, other.token_budget),
                      least(self.cost_budget, other.cost_budget),
                      self.approvals_required or other.approvals_required,
                      tuple(dict.fromkeys((*self.locked_folders, *other.locked_folders))),
                      self.message or other.message, sources)

    def rows(self) -> list[tuple[str, str, str]]:
        """(rule, value, file) for each rule set: what ``%agent policy`` shows."""
        shown = []
        for key in KEYS:
            value = getattr(self, key)
            if value in (None, (), {}, False):
                continue
            text = value if isinstance(value, str) else json.dumps(
                list(value) if isinstance(value, tuple) else value)
            shown.append((key, text, self.where(key)))
        return shown


KEYS = ("allowed_providers", "allowed_base_urls", "allowed_models", "disallowed_capabilities", "token_budget",
        "cost_budget", "approvals_required", "locked_folders", "message")


def load(path: str | os.PathLike) -> Policy:
    """One policy file, checked: an unknown key or a value of the wrong kind is an error naming
    the file and the key."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PolicyError(f"{where}: cannot read the course policy: {error}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: a course policy is a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r}; keys: {', '.join(KEYS)}")
    rules: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("allowed_providers", "allowed_base_urls", "allowed_models", "disallowed_capabilities",
                   "locked_folders"):
            rules[key] = _names(key, value, where)
        elif key == "token_budget":
            rules[key] = _limits(key, value, where, int)
        elif key == "cost_budget":
            rules[key] = _limits(key, value, where, (int, float))
        elif key == "approvals_required":
            if not isinstance(value, bool):
                raise PolicyError(f"{where}: approvals_required must be true or false, got {json.dumps(value)}")
            rules[key] = value
        elif key == "message":
            if not isinstance(value, str):
                raise PolicyError(f"{where}: message must be a string, got {json.dumps(value)}")
            rules[key] = value
    if "locked_folders" in rules:
        rules["locked_folders"] = tuple(os.path.realpath(os.path.expanduser(p)) for p in rules["locked_folders"])
    return Policy(**rules, sources={key: (where,) for key in rules})


# What jupyter_config_path() reads: its answer is kept per value of these (it costs more than
# the rest of a run's policy check, which runs before every run).
_CONFIG_ENV = ("JUPYTER_CONFIG_DIR", "JUPYTER_CONFIG_PATH", "JUPYTER_PREFER_ENV_PATH", "JUPYTER_NO_CONFIG",
               "JUPYTER_PLATFORM_DIRS", "HOME", "XDG_CONFIG_HOME", "CONDA_PREFIX", "VIRTUAL_ENV")


@functools.lru_cache(maxsize=8)
def _config_folders(environment: tuple) -> tuple[str, ...]:
    try:
        from jupyter_core.paths import jupyter_config_path
    except ImportError:  # no Jupyter here: only the variable can name a policy
        return ()
    return tuple(jupyter_config_path())


def _in_force() -> tuple[tuple[str, int, int], ...]:
    """Each policy file in force as (path, mtime, size): BETTONG_NB_POLICY's (which must exist
    when set: a policy that cannot be found must not silently lift), then each config folder's.
    One os.stat per candidate (pathlib's is_file and stat cost 4x as much, before every run)."""
    found: list[tuple[str, int, int]] = []
    named = os.environ.get(ENV)
    if named:
        facts = _regular_file(named)
        if facts is None:
            raise PolicyError(f"{ENV}={named}: no such course policy file")
        found.append((named, *facts))
    environ = os.environ
    for folder in _config_folders(tuple(map(environ.get, _CONFIG_ENV))):
        candidate = os.path.join(folder, FILENAME)
        facts = _regular_file(candidate)
        if facts is not None and all(candidate != path for path, *_ in found):
            found.append((candidate, *facts))
    return tuple(found)


def _regular_file(path: str) -> tuple[int, int] | None:
    try:
        facts = os.stat(path)
    except (OSError, ValueError):
        return None
    return (facts.st_mtime_ns, facts.st_size) if stat.S_ISREG(facts.st_mode) else None


_cache: dict[tuple, Policy | None] = {}


def current() -> Policy | None:
    """The merged policy of every file in force, or None when there is none; read again when a
    file changes."""
    key = _in_force()
    if key not in _cache:
        merged = None
        for path, *_ in key:
            one = load(Path(path))
            merged = one if merged is None else merged.merged(one)
        _cache.clear()
        _cache[key] = merged
    return _cache[key]


# --- the exam lock ----------------------------------------------------------------------------

def notebook_path() -> str | None:
    """The notebook this kernel runs, as the Jupyter server told it at start (JPY_SESSION_NAME,
    which IPython also shows as ``__session__``); None when nobody said (nbclient and papermill
    set only the working folder, unless their kernel is started with that variable)."""
    name = os.environ.get("JPY_SESSION_NAME")
    return os.path.realpath(name) if name and name.endswith(".ipynb") else None


_metadata_cache: dict[tuple, dict] = {}


def _saved_metadata(path: str) -> dict:
    try:
        facts = os.stat(path)
    except OSError:
        return {}
    key = (path, facts.st_mtime_ns, facts.st_size)
    if key not in _metadata_cache:
        try:
            metadata = json.loads(Path(path).read_text(encoding="utf-8")).get("metadata") or {}
        except (OSError, ValueError, AttributeError):
            metadata = {}
        _metadata_cache.clear()
        _metadata_cache[key] = metadata if isinstance(metadata, dict) else {}
    return _metadata_cache[key]


_live: list[Callable[[], Mapping[str, Any] | None] | None] = [None]


def install_notebook(reader: Callable[[], Mapping[str, Any] | None] | None) -> None:
    """Ask ``reader()`` for the notebook's metadata as its page shows it (the notebook layer
    installs the frontend's at ``%load_ext bettong_nb``); None: the saved file only."""
    _live[0] = reader


def _says_off(metadata: Any) -> bool:
    settings = metadata.get("bettong_nb") if isinstance(metadata, Mapping) else None
    # "off" in any case, or false: a teacher's spelling never leaves the exam open.
    return isinstance(settings, Mapping) and (settings.get("agent") is False or
                                              str(settings.get("agent", "")).strip().lower() == "off")


def notebook_lock(rules: Policy | None, *, metadata: Mapping[str, Any] | None = None,
                  path: str | None = None) -> str | None:
    """Why agents are off in this kernel's notebook, or None. ``metadata``/``path``: the ones to
    judge (a test's); else the saved file's and the page's, locked when either says so.
    Outside a Jupyter kernel: None."""
    if kernel.jupyter_kernel() is None and metadata is None:
        return None
    path = path or notebook_path()
    if metadata is not None:
        judged = [metadata]
    else:
        reader = _live[0]
        judged = [_saved_metadata(path) if path else {}, reader() if reader is not None else None]
    if any(_says_off(one) for one in judged):
        return "agents are off in this notebook (exam lock: its metadata has \"bettong_nb\": {\"agent\": \"off\"})"
    if rules is not None and rules.locked_folders:
        # Without the notebook's path (nbclient, papermill), its folder is the kernel's working folder.
        place = os.path.realpath(path) if path else os.path.realpath(os.getcwd())
        for folder in rules.locked_folders:
            if place == folder or place.startswith(folder.rstrip(os.sep) + os.sep):
                return f"agents are off for notebooks under {folder} (exam lock; course policy " \
                       f"{rules.where('locked_folders')}: locked_folders)"
    return None


def check_notebook(rules: Policy | None) -> None:
    """Raise PolicyError when this kernel's notebook is locked (for %%agent and %agent)."""
    why = notebook_lock(rules)
    if why is not None:
        note = f" {rules.message}" if rules is not None and rules.message else ""
        raise PolicyError(f"{why}.{note}")


# --- budgets ----------------------------------------------------------------------------------

class _Pool:
    """What a scope (the kernel, one session) spent under the policy, in tokens and money, and
    what requests under way hold."""

    def __init__(self) -> None:
        self.tokens, self.money, self.held_tokens, self.held_money = 0, 0.0, 0, 0.0
        self.uncounted = False  # an answer came whose cost nobody could say: the cost budget fails closed
        self.lock = threading.Lock()


@dataclass
class _Draw:
    """One run's share of a pool: the core loop holds each request's estimate in it before
    sending (``take``) and counts what came back (``settle``), as it does with a Budget. An
    answer costs what the course gateway billed for it, else what the run's prices make of it."""

    scope: str
    pool: _Pool
    tokens: int | None
    cost: float | None
    prices: Mapping[str, Any] | None
    where: str

    def _money(self, usage: Usage) -> float:
        return (cost(usage, **self.prices) or 0.0) if self.prices else 0.0

    def refusal(self, estimate: int) -> str | None:
        pool = self.pool
        if self.tokens is not None and pool.tokens + pool.held_tokens + estimate > self.tokens:
            return (f"the course policy's {self.scope} token budget of {self.tokens} would be exceeded "
                    f"({pool.tokens} used, {pool.held_tokens} held, the next request needs about {estimate}; "
                    f"{self.where})")
        if self.cost is not None:
            if pool.uncounted:
                return (f"the course policy's {self.scope} cost budget cannot be kept: an answer came without "
                        f"its cost (the gateway reported none) and this agent has no prices= ({self.where})")
            upcoming = self._money(Usage(prompt_tokens=estimate))
            if pool.money + pool.held_money + upcoming > self.cost:
                currency = (self.prices or {}).get("currency")
                return (f"the course policy's {self.scope} cost budget of {money(self.cost, currency)} would be "
                        f"exceeded ({money(pool.money, currency)} spent; {self.where})")
        return None

    async def take(self, estimate: int) -> str | None:
        with self.pool.lock:
            why = self.refusal(estimate)
            if why is None:
                self.pool.held_tokens += estimate
                self.pool.held_money += self._money(Usage(prompt_tokens=estimate))
            return why

    def settle(self, usage: Usage | None, estimate: int, billed: float | None = None) -> None:
        with self.pool.lock:
            self.pool.held_tokens -= estimate
            self.pool.held_money -= self._money(Usage(prompt_tokens=estimate))
            if usage is not None:
                self.pool.tokens += usage.prompt_tokens + usage.completion_tokens
                self.pool.money += billed if billed is not None else self._money(usage)
                self.pool.uncounted |= billed is None and not self.prices and self.cost is not None


_kernel_pool = _Pool()
_session_pools: "dict[int, tuple[Any, _Pool]]" = {}


def reset_spending() -> None:
    """Forget what this kernel spent under the policy (for tests and a teacher's own kernel)."""
    global _kernel_pool
    _kernel_pool = _Pool()
    _session_pools.clear()


def _pool(scope: str, conversation: Any) -> _Pool:
    if scope == "kernel":
        return _kernel_pool
    if conversation is None:  # a run on its own is a conversation of one turn
        return _Pool()
    held = _session_pools.get(id(conversation))
    if held is None or held[0] is not conversation:
        held = _session_pools[id(conversation)] = (conversation, _Pool())
    return held[1]


# --- the check at a run's start ---------------------------------------------------------------

def _person_decides(rules: Policy, approve_fn: Any):
    """``approve_fn`` first (its no stands), then a person, unless the yes was already a person's."""
    async def decide(request: approvals.ApprovalRequest) -> approvals.Verdict:
        first = await approvals.decide(approve_fn, request) if approve_fn is not None else approvals.Allow()
        if not first or first.person:
            return first
        answer = await approvals.ask_a_person(request)
        if answer and answer.person:
            return answer
        reason = answer.reason if isinstance(answer, approvals.Deny) and answer.reason else "nobody approved it"
        return approvals.Deny(f"{reason}; the course policy ({rules.where('approvals_required')}) "
                              "requires a person's approval for every tool call")
    return decide


def _normal_url(url: str) -> str:
    return url.rstrip("/").lower()


def admit(provider: Any, options: Any, *, conversation: Any = None) -> tuple[Any, list]:
    """Check a run against the policy and the exam lock before its first request: raises
    PolicyError, else returns the options to run with (approvals) and the policy's budgets."""
    rules = current()
    check_notebook(rules)
    if rules is None:
        return options, []
    name = getattr(provider, "name", None)
    if rules.allowed_providers is not None and name not in rules.allowed_providers:
        raise rules.refuse("allowed_providers", f"provider {name or type(provider).__name__!r} is not allowed "
                           f"(allowed: {', '.join(rules.allowed_providers)})")
    if rules.allowed_base_urls is not None:
        url = str(getattr(provider, "base_url", None) or "")
        if _normal_url(url) not in {_normal_url(u) for u in rules.allowed_base_urls}:
            raise rules.refuse("allowed_base_urls", f"base URL {url or '(none)'!r} is not allowed")
    if rules.allowed_models is not None and options.model not in rules.allowed_models:
        raise rules.refuse("allowed_models", f"model {options.model!r} is not allowed "
                           f"(allowed: {', '.join(rules.allowed_models)})")
    from .capability import capability_label

    for capability in options.capabilities:
        # By its id or its kind (an MCP server's id is the user's choice; its class is MCP).
        label, kind = capability_label(capability).lower(), type(capability).__name__.lower()
        if {label, kind} & {name.lower() for name in rules.disallowed_capabilities}:
            raise rules.refuse("disallowed_capabilities", f"capability {label!r} is not allowed")
    budgets = []
    for scope in SCOPES:
        tokens, money_limit = rules.token_budget.get(scope), rules.cost_budget.get(scope)
        if tokens is not None or money_limit is not None:
            where = " + ".join(dict.fromkeys(
                (*rules.sources.get("token_budget", ()) * (tokens is not None),
                 *rules.sources.get("cost_budget", ()) * (money_limit is not None))))
            budgets.append(_Draw(scope, _pool(scope, conversation), tokens, money_limit, options.prices, where))
    if rules.approvals_required:
        options = replace(options, approve_fn=_person_decides(rules, options.approve_fn))
    return options, budgets
