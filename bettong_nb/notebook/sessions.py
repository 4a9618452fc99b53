"""The sessions ``%%agent`` keeps: the default one, and one per Agent TARGET.

    sessions = Sessions(shell, config=lambda: ("offline", None, 10, ()))
    name, session, notes = sessions.target("bot")   # bot: an Agent or Session in the namespace
    sessions.table()                                # what %agent sessions shows

A Session TARGET is the user's own and is used as it is; an Agent gets a session kept here under
its name (rebinding the name to another agent starts a new one). The default session follows
the configuration ``config()`` returns: a change of provider, model, max_steps or prices swaps
its agent and keeps its conversation.
"""

from __future__ import annotations

from typing import Any, Callable

from IPython.core.error import UsageError

__all__ = ["Sessions", "Entry", "DEFAULT"]

DEFAULT = "(default)"  # not an identifier, so no TARGET name can collide with it


class Entry:
    """A session the magic keeps, and what it was made from (an agent, or the default config)."""

    __slots__ = ("session", "source", "kind")

    def __init__(self, session: Any, source: Any, kind: str):
        self.session, self.source, self.kind = session, source, kind


def _default_agent(config: tuple) -> Any:
    from ..presets import deepseek, offline

    kind, model, max_steps, prices = config
    make = deepseek if kind == "deepseek" else offline
    return make(max_steps=max_steps, model=model, prices=dict(prices) if prices else None)


class Sessions:
    """The registry. ``config()``: the default session's (provider, model, max_steps, prices)."""

    def __init__(self, shell: Any, config: Callable[[], tuple]):
        self.shell, self.config = shell, config
        self.entries: dict[str, Entry] = {}

    def default(self, *, new: bool = False) -> tuple[Any, list[str]]:
        from ..core.session import Session

        config = self.config()
        entry = self.entries.get(DEFAULT)
        notes = []
        if entry is None or new:
            entry = self.entries[DEFAULT] = Entry(Session(_default_agent(config)), config, DEFAULT)
        elif entry.source != config:
            entry.session.agent = _default_agent(config)  # keep the conversation, swap the model
            entry.source = config
            notes.append(f"The default session now uses {config[0]}"
                         f"{f' ({config[1]})' if config[1] else ''}; the conversation continues.")
        if config[0] == "offline" and entry.session.turns == 0:
            notes.append("No DEEPSEEK_API_KEY: the default session uses the offline demo model.")
        return entry.session, notes

    def target(self, name: str | None, *, new: bool = False) -> tuple[str, Any, list[str]]:
        """(name, session, notes) for a TARGET name; None means the default session."""
        from ..core.agent import Agent
        from ..core.session import Session

        if not name:
            session, notes = self.default(new=new)
            return DEFAULT, session, notes
        if not name.isidentifier():
            raise UsageError(f"TARGET must be the name of an Agent or Session in your namespace; got {name!r}. "
                             "Options start with --; see %%agent --help.")
        ns = self.shell.user_ns
        if name not in ns:
            raise UsageError(f"No agent or session named {name!r} in the namespace. Define it first, e.g. "
                             f"{name} = bettong_nb.deepseek() or {name} = bettong_nb.deepseek().session(); "
                             "or drop TARGET to use the default session.")
        value = ns[name]
        if isinstance(value, Session):
            if new:
                value.clear()
            return name, value, []
        if not isinstance(value, Agent) or isinstance(value, type):
            raise UsageError(f"{name!r} is a {type(value).__name__}, not an Agent or Session "
                             "(anything with run() and arun()).")
        entry = self.entries.get(name)
        if entry is None or entry.source is not value or new:
            session = value.session() if hasattr(value, "session") else Session(value)
            entry = self.entries[name] = Entry(session, value, "agent")
        return name, entry.session, []

    def existing(self, name: str | None) -> Any:
        """The session of TARGET ``name`` for a line command; the default one only once it has run."""
        if name is None:
            entry = self.entries.get(DEFAULT)
            if entry is None:
                raise UsageError("No default session yet: run a %%agent cell first.")
            return entry.session
        return self.target(name)[1]

    def table(self) -> Any:
        """The kept sessions and the user's own Sessions, one row each (a DataFrame)."""
        import pandas as pd

        from ..core.session import Session

        rows, seen = [], set()
        for name, entry in self.entries.items():
            rows.append((name, entry.kind, entry.session))
            seen.add(id(entry.session))
        for name, value in self.shell.user_ns.items():
            if isinstance(value, Session) and id(value) not in seen and not name.startswith("_"):
                rows.append((name, "session", value))
                seen.add(id(value))
        frame = pd.DataFrame(
            [{"name": n, "kind": k, "turns": s.turns, "messages": len(s.transcript), "requests": s.usage.requests,
              "total_tokens": s.usage.total_tokens, "tool_calls": len(s.tool_calls)} for n, k, s in rows],
            columns=["name", "kind", "turns", "messages", "requests", "total_tokens", "tool_calls"])
        return frame.astype({"turns": "int64", "messages": "int64", "requests": "int64", "total_tokens": "int64",
                             "tool_calls": "int64"})
