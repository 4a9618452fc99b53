# Our own matcher, not a regex alternation of known values and token shapes: on tests/corpora (2026-12) it redacts 142/142 exposures (the alternation 56/142: no encoded forms) and leaves 38/38 benign texts alone (34/38), in 15 ms CPU for bench W5's 1 MB (the alternation 39 ms).
"""Credential stripping and redaction: nothing secret reaches the model provider.

Every tool result and tool error goes through :func:`redact` before it is uploaded::

    text, count = redact("token=sk-abc...", extra=[api_key])   # count says how many, never what
    with revealed():        # only in here is tool output passed through unredacted
        ...
    url_without_credentials("https://u:pw@host/v1")   # 'https://u:[redacted]@host/v1', for reprs
    is_credential_path("home/me/.ssh/id_ed25519")     # True: files no tool may touch unasked

What is redacted (each stretch replaced by ``[redacted]``):

* the values of credential-named environment variables (:func:`is_credential_name`, read
  afresh on every call) and of ``extra`` (the keys the agent holds), in these forms: as
  they are; base64 and base64url, wherever the value sits in a longer base64 stream (all
  three byte alignments); hex, either case; URL-encoded (``%2F`` or ``%2f``, ``+`` or
  ``%20``); JSON-escaped (also ``\\/`` and twice-escaped). Each line of a multi-line
  value (a PEM key in a variable) counts as a value too. A value shorter than
  :data:`MIN_SECRET_LENGTH` is not a secret: it would shred ordinary output.
* any of those forms broken across lines, however often (``\\n``, ``\\r\\n``), as
  ``base64``, ``xxd -p`` or ``fold -w 20`` print them;
* well-known token shapes, whoever they belong to: ``sk-…`` (OpenAI, DeepSeek,
  Anthropic ``sk-ant-…``), GitHub ``ghp_ gho_ ghu_ ghs_ ghr_ github_pat_``, AWS key ids
  ``AKIA…``/``ASIA…``, Slack ``xox[abposr]-…``, Google ``AIza…``, JWTs
  ``eyJ….eyJ….…``, and the key material of PEM private-key blocks — across lines, on one
  line with escaped ``\\n``, and cut off at either end as truncated output shows it.
* credentials in a URL's userinfo, for any scheme: the password of
  ``postgres://user:PASSWORD@host`` (``redis://:PASSWORD@host`` too), and a token standing
  alone, ``https://TOKEN@host``, unless it reads like a user name (``git@``, ``jovyan@``:
  shorter than :data:`MIN_SECRET_LENGTH`, or only lower-case letters, ``.``, ``-``, ``_``).
  A password may hold ``@`` (the last ``@`` of the authority ends it) and, when the URL
  then makes no sense otherwise, ``/``, ``?`` or ``#`` (``user:pa/ss@host``; a port with a
  path, ``host:8080/@x``, is not a password). JSON's ``:\\/\\/`` counts as ``://``.

Not covered: a value split by anything but a line break (spaces, ``xxd``'s columns, an
escaped ``\\n``, indentation after the break); encodings not listed (gzip, rot13,
UTF-16, base64 of the hex, ...); a value shown a few characters at a time; a token shape
not in the environment and broken across lines (bar PEM blocks); an AWS *secret* access
key, which has no shape, unless it is in the environment; a URL whose userinfo is itself
percent-encoded into another URL (``?next=postgres%3A%2F%2Fu%3Apw%40h``). The base64 of a value is
redacted except for the one or two characters at each end that mix in the neighbouring
bytes (together at most 4 bits of the value).
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import itertools
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

__all__ = ["REDACTED", "MIN_SECRET_LENGTH", "CREDENTIAL_PATHS", "is_credential_name", "is_credential_path",
           "credential_values", "stripped_env", "holds_credential", "embedded_credentials", "redact", "redact_data", "redaction_spans", "revealed", "redacting",
           "url_without_credentials", "values_held_by", "hold", "held"]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would shred ordinary output

# A substring match, like the original: MONKEY, AUTHOR and SSH_AUTH_SOCK count too, which
# costs little. PASS alone only as a whole word (DB_PASS), or COMPASS and BYPASS would count.
_CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|(?<![A-Z0-9])PASS(?![A-Z0-9])",
    re.I)
# A context variable because no caller can pass it: redaction runs inside tools (the shell redacts
# its output before cutting it), which are called with the model's arguments only.
_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar("bettong_redact", default=True)


@functools.lru_cache(maxsize=4096)  # every redaction reads the environment's names again
def is_credential_name(name: str) -> bool:
    """True for names holding KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL,
    AUTH or PRIVATE (any case), or the word PASS: ``OPENAI_API_KEY``, ``DB_PASS``, but
    not ``PATH``, ``PWD`` or ``COMPASS_URL``."""
    return bool(_CREDENTIAL_NAME.search(name))


# Files that hold credentials, as globs over the end of a path, any letter case: a pattern
# without "/" names the last component (``*.pem``), one with "/" the last components
# (``.aws/credentials``), and a final ``**`` everything below a directory (which itself can
# still be listed). Checked against gitrob-style signature lists and the credential stores
# of the CLIs a notebook user is likely to have logged in with.
CREDENTIAL_PATHS = (
    # SSH, GPG, PuTTY
    ".ssh/**", ".gnupg/**", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*_rsa", "*_dsa", "*_ecdsa",
    "*_ed25519", "*.ppk",
    # private keys, PKCS#12 bundles, keystores, password databases
    "*.pem", "*.key", "*.p8", "*.p12", "*.pfx", "*.pkcs12", "*.jks", "*.keystore", "*.bks", "*.kdbx",
    "*.keychain", "*.keychain-db", "*.psafe3", ".password-store/**", ".local/share/keyrings/**",
    # environment files
    ".env", ".env.*",
    # cloud CLIs: AWS, Google Cloud, Azure, Databricks, Kaggle, Hugging Face, GitHub, S3 tools
    ".aws/credentials*", ".aws/sso/cache/**", ".aws/cli/cache/**", "application_default_credentials.json",
    "credentials.db", "access_tokens.db", "gcloud/legacy_credentials/**", "credentials.json", "client_secret*.json",
    "service?account*.json", ".azure/accessTokens.json", ".azure/service_principal_entries.*", "msal_token_cache*",
    ".databrickscfg", "kaggle.json", "huggingface/token", "huggingface/stored_tokens", "gh/hosts.yml", ".config/hub",
    ".s3cfg", ".boto", "rclone.conf", ".streamlit/secrets.toml",
    # package registries, containers, infrastructure tools
    ".npmrc", ".pypirc", ".gem/credentials", ".cargo/credentials", ".cargo/credentials.toml", ".composer/auth.json",
    ".docker/config.json", ".dockercfg", ".kube/config", "kubeconfig", "*.kubeconfig", ".terraformrc", "terraform.rc",
    "credentials.tfrc.json", "*.tfstate", "*.tfstate.backup", ".vault-token",
    # git, HTTP and database logins
    ".git-credentials", ".netrc", "_netrc", ".pgpass", ".my.cnf", ".mylogin.cnf", ".htpasswd",
    # a process's environment and memory, where the kernel keeps its keys
    "proc/*/environ", "proc/*/task/*/environ", "proc/*/mem", "proc/*/task/*/mem",
)


def _path_glob(pattern: str) -> str:
    parts = []
    for part in pattern.split("/"):
        if part == "**":
            parts.append("[^/]+(?:/[^/]+)*")
        else:
            parts.append("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part))
    return "(?:^|/)" + "/".join(parts) + "$"


@functools.cache
def _credential_path() -> re.Pattern:  # compiled on first use: it would add ~4 ms to importing
    return re.compile("|".join(map(_path_glob, CREDENTIAL_PATHS)), re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # a query or a listing asks about the same paths again and again
def is_credential_path(path: str) -> bool:
    """True when ``path`` (absolute or relative; a resolved path is best) names a credential
    file of :data:`CREDENTIAL_PATHS`, as written or once ``.``/``..`` are folded::

        is_credential_path("/home/u/.ssh/id_rsa")   # True
        is_credential_path("deploy/.env.production")  # True
        is_credential_path("/home/u/.ssh")          # False: the directory can be listed
    """
    path = path.replace("\\", "/").rstrip("/")
    pattern = _credential_path()
    return bool(pattern.search(path) or pattern.search(os.path.normpath(path)))


_environ_seen: list = [None, []]  # a copy of os.environ as last read, and what it held


def credential_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of credential-named variables worth redacting (``os.environ`` by default)."""
    if env is None:
        # Every redaction asks; the process environment rarely changes, and comparing a copy of
        # it (one C-level dict comparison) costs far less than reading it again.
        raw = getattr(os.environ, "_data", None)
        if raw is not None and raw == _environ_seen[0]:
            return _environ_seen[1]
        values = credential_values(dict(os.environ))
        if raw is not None:
            _environ_seen[:] = [dict(raw), values]
        return values
    return list(dict.fromkeys(
        v for k, v in env.items()
        if is_credential_name(k) and isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LENGTH))


def stripped_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A child-process environment without the variables that hold a credential: those with a
    credential-like name (:func:`is_credential_name`), and those whose *value* holds one — the
    password in a URL (``DATABASE_URL=postgres://admin:pw@db/x``), a known token shape, or any
    form of a value :func:`redact` hides (a credential-named variable's, a held key), or a
    credential-named ``name=value`` pair (``DATABASE_URL=...?sslmode=require&password=pw``,
    ``#access_token=``, ``;password=``, ``host=db password=pw``). Redacting
    the child's output is not enough for those: it can print a value in spellings redaction
    does not know (reversed, a few characters at a time, ``${URL#*:*:}``)."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if not is_credential_name(k) and not holds_credential(v)}


def holds_credential(value: str) -> bool:
    """True when ``value`` holds a credential anywhere in it, whether or not this context redacts:
    a password in a URL, a known token shape, any form of a value :func:`redact` hides, or a
    credential-named ``name=value`` pair (``?api_key=``, ``#access_token=``, ``;password=``,
    ``host=db password=pw``)."""
    return bool(_spans(value.encode("utf-8", "surrogatepass"), ()) or _credential_pairs(value))


# ``name=value`` with a credential-like name: in a URL's query (``?api_key=``, ``&token=``) or
# fragment (``#access_token=``), after a JDBC URL's ``;password=``, or in a libpq keyword
# string (``host=db password=pw``). A name may be percent-encoded (``api%5Fkey``).
_PAIR = re.compile(r"(?:^|(?<=[?&;#\s]))([A-Za-z0-9_.%-]+)=([^&;#\s]*)")


def _credential_pairs(value: str) -> list[str]:
    """The values of the credential-named ``name=value`` pairs in ``value``, each also decoded."""
    if "=" not in value:
        return []
    found = []
    for name, secret in _PAIR.findall(value):
        if secret and is_credential_name(unquote(name)):
            found += [secret, unquote_plus(secret)]
    return list(dict.fromkeys(found))


def embedded_credentials(value: str) -> list[str]:
    """The credentials written inside a longer value, for redacting them where they appear
    alone: the password (or token) in a URL's userinfo and each credential-named pair's value::

        embedded_credentials("postgres://app:pw1@db/x?sslkey=k;password=pw2")   # ['pw1', 'k', 'pw2']
    """
    data = value.encode("utf-8", "surrogatepass")
    found = [data[start:end].decode("utf-8", "surrogatepass") for start, end in _userinfo(data)] if b"@" in data else []
    return list(dict.fromkeys(found + _credential_pairs(value)))


def values_held_by(holders: Iterable[object]) -> list[str]:
    """What ``holders`` (a provider, capabilities) say must never be shown: their ``secret_values()``."""
    return [value for holder in holders for value in getattr(holder, "secret_values", lambda: [])()]


_held: set[str] = set()


def hold(values: Iterable[str | None]) -> None:
    """Remember values an agent holds (its API key, a capability's password) for the rest of the
    process, in memory only: what is written to disk later (a saved session, an exported run) is
    redacted of them even when the agent that held them is gone."""
    _held.update(v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LENGTH)


def held() -> list[str]:
    """The values :func:`hold` was given; :func:`redact` always hides them too."""
    return list(_held)


def redacting() -> bool:
    """False only inside ``with revealed():``."""
    return _enabled.get()


@contextlib.contextmanager
def revealed() -> Iterator[None]:
    """Pass tool output through unredacted, in this context (thread, task) only."""
    token = _enabled.set(False)
    try:
        yield
    finally:
        _enabled.reset(token)


def redact(text: str, *, extra: Iterable[str | None] = ()) -> tuple[str, int]:
    """``(text with secrets replaced by [redacted], number of stretches replaced)``.

    Overlapping or touching matches are one stretch. Empty text and ``None`` come back
    unchanged. See the module docstring for what counts as a secret.
    """
    if not text or not _enabled.get():
        return text, 0
    plain = text.isascii()  # then byte positions are character positions
    data = text.encode() if plain else text.encode("utf-8", "surrogatepass")
    spans = _spans(data, extra)
    if not spans:
        return text, 0
    source, marker = (text, REDACTED) if plain else (data, REDACTED.encode())
    out, pos = [], 0
    for start, end in spans:
        out += (source[pos:start], marker)
        pos = end
    out.append(source[pos:])
    return ("".join(out) if plain else b"".join(out).decode("utf-8", "surrogatepass")), len(spans)


def redact_data(value: Any, *, extra: Iterable[str | None] = ()) -> tuple[Any, int]:
    """``(JSON-like value with every string in it redacted, keys too; stretches replaced)``, for
    what goes to disk (a string redacted one by one, not the JSON text: there a broken line is
    ``\\n``). Image bytes (``{"type": "image", "data": base64}``) are not text and are left as
    they are; any other object is written as its text, redacted."""
    extra, count = list(extra), 0

    def scrub(item: Any) -> Any:
        nonlocal count
        if isinstance(item, Mapping):
            if item.get("type") == "image" and isinstance(item.get("data"), str):
                return {k: v if k == "data" else scrub(v) for k, v in item.items()}
            return {scrub(str(k)): scrub(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [scrub(v) for v in item]
        if item is None or isinstance(item, (bool, int, float)):
            return item
        text, found = redact(str(item), extra=extra)  # anything else is written as its text
        count += found
        return text

    return scrub(value), count


def redaction_spans(text: str, *, extra: Iterable[str | None] = ()) -> list[tuple[int, int]]:
    """The ``(start, end)`` character spans :func:`redact` replaces in ``text``, in order: for
    code that cuts a text and must not cut a secret in two (the shell's head and tail)."""
    if not text or not _enabled.get():
        return []
    if text.isascii():
        return _spans(text.encode(), extra)
    data = text.encode("utf-8", "surrogatepass")
    out, chars, at = [], 0, 0
    for start, end in _spans(data, extra):
        # characters are the bytes that do not continue a UTF-8 sequence
        first = chars + len(data[at:start].translate(None, _CONTINUATION))
        chars = first + len(data[start:end].translate(None, _CONTINUATION))
        out.append((first, chars))
        at = end
    return out


_CONTINUATION = bytes(range(0x80, 0xC0))


def _worth(values: Iterable[str | None]) -> frozenset[str]:
    return frozenset(v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LENGTH)


# Up to this many values of the environment and held keys, one matcher takes them with a call's
# ``extra`` (one scan of the text). Past it (a long-lived process that built many agents), the
# call's own values get a matcher of their own: building one over every held value for each new
# ``extra`` cost ~70 ms a call with a few hundred held, and grew with each.
_ONE_MATCHER_UP_TO = 64


def _spans(data: bytes, extra: Iterable[str | None]) -> list[tuple[int, int]]:
    """Sorted, merged spans of every secret in ``data``: the token shapes and URL passwords, the
    forms of ``extra``, and those of what agents of this process hold (their keys) and the
    environment's credentials, which count everywhere (a tool that cuts its own output, the
    shell, must not cut through the provider's key either)."""
    known = _worth([*credential_values(), *_held])
    own = _worth(extra) - known
    if not own or len(known) <= _ONE_MATCHER_UP_TO:
        return _matcher(known | own).spans(data)
    return _merge(_matcher(known).spans(data) + _matcher(own, False).spans(data))


# --- the forms of a value -----------------------------------------------------------------------

def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters fixed by ``data`` alone, at each alignment in a longer stream.

    Preceded by k bytes, ``data`` covers bits [8k, 8k + 8n) of the stream; the characters
    wholly inside that are the same whatever surrounds it.
    """
    cores = set()
    for k in range(3):
        encoded = base64.b64encode(bytes(k) + data).decode()
        core = encoded[-(-8 * k // 6):(8 * k + 8 * len(data)) // 6]
        cores.add(core)
        cores.add(core.translate(_URLSAFE))
    return cores


_URLSAFE = str.maketrans("+/", "-_")


def _forms(value: str) -> set[str]:
    """Every literal spelling of one value that is redacted."""
    plain = {value, value.strip()}
    plain |= {line.strip() for line in value.splitlines()}
    forms = set()
    for v in plain:
        if len(v) < MIN_SECRET_LENGTH:
            continue
        data = v.encode()
        escaped = {json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]}
        escaped |= {e.replace("/", "\\/") for e in escaped}
        escaped |= {json.dumps(e)[1:-1] for e in escaped}  # JSON text inside a JSON string
        quoted = {quote(v, safe=""), quote(v), quote_plus(v, safe=""), quote_plus(v)}
        quoted |= {re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), q) for q in quoted}
        forms |= {v, data.hex(), data.hex().upper(), *escaped, *quoted, *_base64_cores(data)}
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


# --- token shapes -------------------------------------------------------------------------------

_PEM_LABEL = rb"(?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BREAK = rb"(?:\r?\n|\\r\\n|\\n)"  # a line break, or one escaped in a JSON string
# Key material, line by line: base64, or an armour header (Proc-Type: 4,ENCRYPTED,
# DEK-Info: ..., Version: ...); then, where the output was cut off, what is left of a
# line. A line with anything else in it ends the block, so a missing END line costs at
# most a word of the output that follows.
_B64 = rb"(?:[A-Za-z0-9+/=]|\\/)"  # with the \/ some JSON encoders write for /
_PEM_BODY = (rb"(?:[ \t]*+(?:" + _B64 + rb"*+|[A-Za-z][A-Za-z-]*+: [^\r\n\\]*+)" + _PEM_BREAK
             + rb")*+(?:[ \t]*+" + _B64 + rb"{4,}+)?")
# The same, read backwards from an END line whose BEGIN was cut off: whole base64 lines,
# then what is left of the first one. Backwards, a JSON-escaped break reads ``n\``: an ``n``
# before a backslash ends a line (else a line would run on into the next and end none); an
# escaped slash reads ``/\``, tried before a lone ``/`` (which would strand its backslash).
_B64_REVERSED = rb"(?:/\\|[A-Za-mo-z0-9+/=]|n(?!\\))"
_PEM_TAIL_BODY = re.compile(rb"[ \t]*+(?:(?:\n\r?|n\\(?:r\\)?)" + _B64_REVERSED + rb"*+[ \t]*+(?=[\r\n]|n\\|\Z))*+"
                            rb"(?:(?:\n\r?|n\\(?:r\\)?)" + _B64_REVERSED + rb"{4,}+)?")


@dataclass(frozen=True)
class _Shape:
    """A token shape, spotted by a rare ``anchor`` character ``len(before)`` characters in.

    ``before`` and ``after`` are the characters around the anchor that make it worth a
    look (each a string of alternatives). ``pattern`` then matches at the token's start;
    what it matches is redacted, or only its ``secret`` group when it has one — a PEM
    block keeps its BEGIN/END lines, and a token that turns out not to be a key (the
    group did not match) is left alone. Later anchors inside a match are not looked at
    again, which keeps the work linear however the text repeats a shape's prefix.
    """
    name: str
    before: tuple[str, ...]
    anchor: str
    after: tuple[str, ...]
    pattern: re.Pattern
    backward: bool = False  # the match is the block's last line; the secret lies before it


_TOKEN = rb"[A-Za-z0-9_-]"
_SHAPES = (
    # sk-<key>, sk-proj-<key>, sk-ant-api03-<key>: 20+ characters with a stretch of 16
    # without a dash, which tells a key from hyphenated words (sk-some-long-option-name).
    _Shape("sk", ("s",), "k", ("-",), re.compile(
        rb"(?<![A-Za-z0-9])(?:(?P<secret>sk-(?=" + _TOKEN + rb"{20})(?=" + _TOKEN + rb"*?[A-Za-z0-9_]{16})"
        + _TOKEN + rb"*+)|sk-" + _TOKEN + rb"*+)")),
    _Shape("github", ("g", "h", "pousr"), "_", (), re.compile(rb"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}+")),
    _Shape("github", tuple("github"), "_", tuple("pat_"), re.compile(
        rb"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}+")),
    _Shape("aws", ("A", "KS"), "I", ("A",), re.compile(rb"(?<![A-Z0-9])A[KS]IA[A-Z0-9]{16}(?![A-Z0-9])")),
    _Shape("slack", (), "x", ("o", "x", "abposr", "-"), re.compile(
        rb"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}+")),
    _Shape("google", ("A",), "I", ("z", "a"), re.compile(rb"AIza[A-Za-z0-9_-]{35}")),
    _Shape("jwt", ("e", "y"), "J", (), re.compile(
        rb"(?P<secret>eyJ" + _TOKEN + rb"*+\.eyJ" + _TOKEN + rb"*+\." + _TOKEN + rb"*+)|eyJ" + _TOKEN + rb"*+")),
    _Shape("pem", tuple("-----BEG"), "I", ("N", " "), re.compile(
        rb"-----BEGIN " + _PEM_LABEL + rb"(?P<secret>" + _PEM_BODY + rb")(?:[ \t]*-----END " + _PEM_LABEL + rb")?")),
    _Shape("pem", tuple("-----EN"), "D", (" ",), re.compile(rb"-----END " + _PEM_LABEL), backward=True),
)


# --- the matcher --------------------------------------------------------------------------------
#
# Hundreds of forms in one alternation make ``re`` try every branch at every position —
# slower than the 20 ms budget for 1 MB. So the search is turned inside out. Text and
# forms are UTF-8 bytes, with the text's line breaks taken out so wrapped forms read whole.
# Each form is anchored on one of its rarer bytes, chosen so that all forms together use
# few, rare anchor bytes; ``bytes.translate`` turns every anchor byte into \x01, and the
# scan, which then starts with one literal byte (the case ``re`` searches fastest), stops
# only there and checks the next three bytes. Every stop that passes is verified against
# the untranslated text.

_GRAM = 4  # an anchor and the 3 bytes after it pick out a candidate
_MARK = 1  # what anchor bytes become in the scanned copy

# Printable ASCII from rarest to commonest in tool output (counted over Python source,
# ls -lR, docs and JSON; digits, and the Z of ISO timestamps, moved up for logs); each
# step is ~7% more frequent. Only speed depends on this table, never what is found.
_RARITY = (b"&?|Q!^X;Y$@K\\~%`BHWGV<FzqMLU>O#D][*CPN+jRETI}{AZ'SJ=)(xvk,w/y_bfh975g8m346:.0pu12"
           b'"dcl-sniarote \t')
_WEIGHT = [1.07 ** (_RARITY.index(b) if b in _RARITY else 40 if b > 127 else len(_RARITY))
           for b in range(256)]


def _anchors(forms: Iterable[bytes], taken: set[int]) -> dict[bytes, int]:
    """``{form: anchor position}``, anchoring all forms on as rare a set of bytes as can be.

    A greedy weighted set cover: the scan stops wherever an anchor byte occurs, so a common
    byte is worth taking only if it anchors many forms. ``taken`` (the token shapes'
    anchors) cost nothing more.
    """
    usable = {f: set(f[:len(f) - _GRAM + 1]) for f in forms}
    chosen = set(taken)
    uncovered = {f for f in usable if not usable[f] & chosen}
    while uncovered:
        counts: dict[int, int] = {}
        for f in uncovered:
            for b in usable[f]:
                counts[b] = counts.get(b, 0) + 1
        best = min(counts, key=lambda b: (_WEIGHT[b] / counts[b], b))
        chosen.add(best)
        uncovered = {f for f in uncovered if best not in usable[f]}
    return {f: min((a for a in range(len(f) - _GRAM + 1) if f[a] in chosen),
                   key=lambda a: (_WEIGHT[f[a]], a)) for f in usable}


def _trie(entries: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A regex for "one of these ``(literal, then assertion)`` pairs follows", prefixes shared.

    For a lookahead: a pair with no assertion that ends at a node makes the rest moot.
    """
    root: dict = {}
    for word, check in entries:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node.setdefault(None, set()).add(check)

    def build(node: dict) -> bytes:
        checks = node.get(None, set())
        if b"" in checks:
            return b""
        branches = [re.escape(bytes([b])) + build(child) for b, child in node.items() if b is not None]
        branches = sorted(branches) + sorted(checks)
        return branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"

    return build(root)


_HEX_DIGITS = b"0123456789abcdefABCDEF"
_HEX_RUNS = bytes(b"h"[0] if b in _HEX_DIGITS else b"."[0] for b in range(256))


def _unbroken(text: str) -> str:
    return text.replace("\r", "").replace("\n", "")


class _Matcher:
    """Finds every form of a fixed set of values, and every token shape, in a text."""

    def __init__(self, values: frozenset[str], shapes: bool = True):
        """``shapes=False``: only the forms of ``values`` (no token shapes, no URL passwords:
        for values looked for beside a matcher that finds those)."""
        forms = {_unbroken(f).encode("utf-8", "surrogatepass") for v in values for f in _forms(v)}
        hex_forms = {f for f in forms if not f.strip(_HEX_DIGITS)}
        forms -= hex_forms
        # Forms of only 0-9a-fA-F (hex, digits) have no rare byte to anchor on. They are
        # looked up in the long runs of those bytes instead, by chunks: any form of at
        # least 2c - 1 bytes holds a whole chunk of c bytes at a multiple of c from the
        # start of its run.
        self.chunks: dict[bytes, list[tuple[bytes, int]]] = {}
        if hex_forms:
            self.shortest = min(map(len, hex_forms))
            self.chunk = self.shortest // 2
            for form in hex_forms:
                for o in range(len(form) - self.chunk + 1):
                    self.chunks.setdefault(form[o:o + self.chunk], []).append((form, o))
        self.shapes: dict[int, list[_Shape]] = {}
        self.urls = shapes
        for shape in _SHAPES if shapes else ():
            self.shapes.setdefault(ord(shape.anchor), []).append(shape)
        self.grams: dict[bytes, list[tuple[bytes, int]]] = {}
        for form, a in _anchors(forms, set(self.shapes)).items():
            self.grams.setdefault(form[a:a + _GRAM], []).append((form, a))
        anchor_bytes = set(self.shapes) | {g[0] for g in self.grams}
        # Other bytes fold into 32 classes: the trie below then branches at most 33 ways at
        # each step, which is what a stop costs; the few extra near-misses are verified.
        self.table = bytes(_MARK if b in anchor_bytes else 0x40 + b % 32 for b in range(256))

        def chars(alternatives: str) -> bytes:  # one position of a shape, as it reads once marked
            marked = sorted({re.escape(c.encode().translate(self.table)) for c in alternatives})
            return marked[0] if len(marked) == 1 else b"[" + b"".join(marked) + b"]"

        # After a mark, one trie of what may follow: a gram's last three bytes, or a shape's
        # ``after`` and then (looking back over it all) its ``before``. A stop costs one
        # pass down the trie, so shapes with nothing after their anchor are few and cheap.
        follows = [(g[1:].translate(self.table), b"") for g in self.grams]
        for shape in _SHAPES if shapes else ():
            for after in itertools.product(*shape.after):
                after = "".join(after).encode().translate(self.table)
                behind = b"".join(map(chars, shape.before)) + re.escape(bytes([_MARK]) + after)
                follows.append((after, b"(?<=" + behind + b")" if shape.before else b""))
        self.scan = re.compile(re.escape(bytes([_MARK])) + b"(?=" + _trie(follows) + b")") if follows else None

    def spans(self, data: bytes) -> list[tuple[int, int]]:
        """Sorted, merged ``(start, end)`` of everything to redact in ``data``."""
        breaks = b"\r\n" if b"\r" in data else b"\n" if b"\n" in data else b""
        joined = data.replace(b"\r", b"").replace(b"\n", b"") if breaks else data
        hits: list[int] = []     # start and end (inclusive) of each form found, in joined
        anchors: list[int] = []  # of token shapes, in joined
        grams, shapes = self.grams, self.shapes
        for m in self.scan.finditer(joined.translate(self.table)) if self.scan is not None else ():
            p = m.start()
            for form, a in grams.get(joined[p:p + _GRAM], ()):
                if p >= a and joined.startswith(form, p - a):
                    hits += (p - a, p - a + len(form) - 1)
            if joined[p] in shapes:
                anchors.append(p)
        if self.chunks:
            hits += self._hex(joined)
        found = _userinfo(data) if self.urls and b"@" in data else []
        if not hits and not anchors and not found:
            return []
        where = _positions(data, breaks, hits + anchors)
        found += [(where[s], where[e] + 1) for s, e in zip(hits[::2], hits[1::2])]
        found += self._shapes(data, [where[p] for p in anchors])
        return _merge(found)

    def _hex(self, joined: bytes) -> list[int]:
        """Hex forms, in the runs of hex digits at least as long as the shortest of them."""
        hits, step, chunks, run = [], self.chunk, self.chunks, b"h" * self.shortest
        marked = joined.translate(_HEX_RUNS)
        hi = 0
        while (lo := marked.find(run, hi)) >= 0:
            hi = marked.find(b".", lo)
            hi = len(marked) if hi < 0 else hi
            for i in range(lo, hi - step + 1, step):
                for form, o in chunks.get(joined[i:i + step], ()):
                    if i - o >= lo and joined.startswith(form, i - o):
                        hits += (i - o, i - o + len(form) - 1)
        return hits

    def _shapes(self, data: bytes, anchors: list[int]) -> list[tuple[int, int]]:
        found = []
        reach: dict[str, int] = {}
        for p in anchors:
            for shape in self.shapes[data[p]]:
                start, seen = p - len(shape.before), reach.get(shape.name, 0)
                match = shape.pattern.match(data, start) if start >= seen else None
                if not match:
                    continue
                reach[shape.name] = match.end()
                if shape.backward:
                    span = _pem_tail(data, seen, match.start())
                else:
                    span = match.span("secret" if "secret" in match.re.groupindex else 0)
                if span[0] >= 0:
                    found.append(_trimmed(data, *span))
        return [s for s in found if s[0] < s[1]]


# --- credentials in URLs ------------------------------------------------------------------------

_SCHEME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_AUTHORITY = re.compile(rb"[^\s/?#\"'<>\\`]*+")  # RFC 3986's authority, ended where text usually ends a URL
# ``user:password@`` when the password holds / ? or # (not valid, but written): up to the
# last @ within 256 bytes, so every start costs a bounded look and the whole scan is linear.
_LOOSE_USERINFO = re.compile(rb"[^\s/?#@:\"'<>\\`]*+:([^\s\"'<>\\`]{1,256})@")
_PORT_AND_PATH = re.compile(rb"[0-9]+[/?#]")
_USER_NAME = re.compile(rb"[a-z._-]+")
_REDACTED_BYTES = REDACTED.encode()


def _userinfo(data: bytes) -> list[tuple[int, int]]:
    """Spans of the passwords and tokens in the userinfo of every URL in ``data``."""
    spans = []
    for separator in (b"://", b":\\/\\/"):
        colon = data.find(separator)
        while colon > 0:
            start = colon + len(separator)
            if data[colon - 1] in _SCHEME_BYTES:
                span = _userinfo_secret(data, start)
                if span is not None:
                    spans.append(span)
            colon = data.find(separator, start)
    return spans


def _userinfo_secret(data: bytes, start: int) -> tuple[int, int] | None:
    """The password (or lone token) of the URL whose authority begins at ``start``."""
    authority = _AUTHORITY.match(data, start).group()
    at = authority.rfind(b"@")
    if at < 0:
        if data.find(b"@", start + len(authority), start + len(authority) + 258) < 0:
            return None  # no @ within reach: the look below would fail, at a cost
        loose = _LOOSE_USERINFO.match(data, start)
        if loose is None or _PORT_AND_PATH.match(loose[1]):
            return None
        span = loose.span(1)
    else:
        colon = authority.find(b":", 0, at)
        if 0 <= colon < at - 1:
            span = (start + colon + 1, start + at)
        elif colon >= MIN_SECRET_LENGTH:  # ``token:@host``: the token is the secret
            span = (start, start + colon)
        elif colon < 0 and at >= MIN_SECRET_LENGTH and not _USER_NAME.fullmatch(authority, 0, at):
            span = (start, start + at)
        else:
            return None
    secret = data[span[0]:span[1]]
    return span if secret and secret != _REDACTED_BYTES else None


def url_without_credentials(url: str) -> str:
    """``url`` with the password (or a lone userinfo token) and credential-named query values
    replaced by ``[redacted]``, for reprs and error messages::

        url_without_credentials("https://me:pw@api.example/v1?api_key=k&x=1")
        # 'https://me:[redacted]@api.example/v1?api_key=[redacted]&x=1'
    """
    try:
        parts = urlsplit(url)
        userinfo, at, host = parts.netloc.rpartition("@")
    except (ValueError, TypeError):
        return url if not isinstance(url, str) else _without_userinfo(url)
    if at:
        user, _, password = userinfo.partition(":")
        # a lone token (``token@host``, ``token:@host``) is the secret; a user name beside a password is not
        userinfo = f"{user}:{REDACTED}" if password else REDACTED
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(is_credential_name(name) for name, _ in pairs):
        query = urlencode([(n, REDACTED if is_credential_name(n) else v) for n, v in pairs], safe="[]")
    if not at and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{host}" if at else host, query=query))


def _without_userinfo(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    out, pos = [], 0
    for start, end in _merge(_userinfo(data)):
        out += (data[pos:start], _REDACTED_BYTES)
        pos = end
    return b"".join([*out, data[pos:]]).decode("utf-8", "surrogatepass")


def _positions(data: bytes, breaks: bytes, joined: Iterable[int]) -> dict[int, int]:
    """``{position in data without line breaks: position of that byte in data}``."""
    if not breaks:
        return {j: j for j in joined}
    out: dict[int, int] = {}
    o = j = 0  # data[o] is joined[j]
    for target in sorted(set(joined)):
        need = target - j  # bytes to step over, line breaks not counted
        while need:
            end = o + need
            need = data.count(b"\n", o, end) + (data.count(b"\r", o, end) if len(breaks) > 1 else 0)
            o = end
        while data[o] in breaks:
            o += 1
        out[target], j = o, target
    return out


def _pem_tail(data: bytes, seen: int, end: int) -> tuple[int, int]:
    """A PEM block whose BEGIN was cut off: back from its END line over the key material."""
    return end - _PEM_TAIL_BODY.match(data[max(seen, end - 65536):end][::-1]).end(), end


def _trimmed(data: bytes, start: int, end: int) -> tuple[int, int]:
    """The span without the whitespace at its ends, so the lines around it keep their breaks."""
    part = data[start:end]
    return start + len(part) - len(part.lstrip()), end - len(part) + len(part.rstrip())


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


_matcher: Callable[..., _Matcher] = functools.lru_cache(maxsize=16)(_Matcher)
