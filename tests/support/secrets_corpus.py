"""The secrets exposure corpus (tests/corpora/secrets_exposures.jsonl) made into cases: each
case's tool output with a secret embedded in one of many forms, the environment or key that
holds it, and every spelling of it that must never reach a model, a file or a trace.

    output, agent_key, env, forbidden = corpus_case(EXPOSURES[0])
    assert not leaks(forbidden, what_the_model_saw)
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from urllib.parse import quote, quote_plus

from . import TESTS

__all__ = ["EXPOSURES", "BENIGN", "b64_core", "corpus_case", "leaks", "make", "embed", "fold", "wrap", "forbidden_forms",
           "pem_body_lines"]

EXPOSURES = [json.loads(line) for line in (TESTS / "corpora" / "secrets_exposures.jsonl").read_text().splitlines()
             if line]
BENIGN = [json.loads(line) for line in (TESTS / "corpora" / "secrets_benign.jsonl").read_text().splitlines() if line]


def b64_core(data: bytes, shift: int, alphabet=base64.b64encode) -> str:
    """The base64 characters fixed by ``data`` alone when ``shift`` bytes precede it: the run,
    around the middle of ``data``, where encodings with different neighbours agree."""
    a = alphabet(b"\x00" * shift + data + b"\x00" * 3).decode()
    b = alphabet(b"\xff" * shift + data + b"\xff" * 3).decode()
    lo = hi = (8 * shift + 4 * len(data)) // 6
    while lo > 0 and a[lo - 1] == b[lo - 1]:
        lo -= 1
    while a[hi] == b[hi]:
        hi += 1
    return a[lo:hi]


def forbidden_forms(value: str) -> set[str]:
    """Every spelling of a value that must not reach the model."""
    out = set()
    for v in {value, value.strip(), *(line.strip() for line in value.splitlines())}:
        if len(v) < 8:
            continue
        data = v.encode()
        quoted = {quote(v, safe=""), quote(v), quote_plus(v)}
        quoted |= {re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), q) for q in quoted}
        escaped = {json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]}
        escaped |= {e.replace("/", "\\/") for e in escaped} | {json.dumps(e)[1:-1] for e in escaped}
        out |= {v, data.hex(), data.hex().upper(), *quoted, *escaped}
        out |= {b64_core(data, k, alpha) for k in range(3) for alpha in (base64.b64encode, base64.urlsafe_b64encode)}
    return {f for f in out if len(f) >= 8}


def make(kind: str, length: int = 0, rng: random.Random | None = None, **spec) -> str:
    """A value of the given kind, built here so the repository holds no token-shaped literal."""
    rng = rng or random.Random(f"{kind}-{length}")

    def pick(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    alnum, urlsafe = string.ascii_letters + string.digits, string.ascii_letters + string.digits + "-_"
    b64url = lambda data: base64.urlsafe_b64encode(data).decode().rstrip("=")  # noqa: E731
    if kind == "literal":
        return spec["literal"]
    simple = {"urlsafe": urlsafe, "alnum": alnum, "hex": "0123456789abcdef", "base64ish": alnum + "+/"}
    if kind in simple:
        return pick(simple[kind], length)
    if kind == "sk":
        return "sk-" + pick(alnum, length)
    if kind == "sk-proj":
        return "sk-" + "proj-" + pick(alnum, 20) + pick(urlsafe, length - 20)
    if kind == "sk-ant":
        return "sk-" + "ant-api03-" + pick(alnum, 20) + pick(urlsafe, length - 22) + "AA"
    if kind == "deepseek":
        return "sk-" + pick("0123456789abcdef", length)
    if kind in ("ghp", "gho", "ghu", "ghs", "ghr"):
        return kind + "_" + pick(alnum, length)
    if kind == "github_pat":
        return "github_" + "pat_" + "11" + pick(alnum + string.ascii_uppercase, 20) + "_" + pick(alnum, length - 23)
    if kind in ("akia", "asia"):
        return kind.upper() + pick(string.ascii_uppercase + string.digits, length)
    if kind.startswith("xox"):
        return kind + "-" + pick(string.digits, 12) + "-" + pick(string.digits, 12) + "-" + pick(alnum, length - 26)
    if kind == "aiza":
        return "AI" + "za" + pick(urlsafe, length)
    if kind in ("jwt", "jwt_none"):
        header = {"alg": "none" if kind == "jwt_none" else "HS256", "typ": "JWT"}
        payload = {"sub": pick(string.digits, 10), "name": pick(string.ascii_letters, 12), "iat": 1516239022}
        signature = "" if kind == "jwt_none" else b64url(rng.randbytes(32))
        return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}.{signature}"
    if kind in ("pem", "pem_legacy_encrypted"):
        label = " ".join(filter(None, [spec.get("label"), "PRIVATE KEY" + (" BLOCK" if spec.get("block") else "")]))
        body = base64.b64encode(rng.randbytes(length)).decode()
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        if kind == "pem_legacy_encrypted":
            lines = ["Proc-Type: 4,ENCRYPTED", f"DEK-Info: AES-128-CBC,{pick('0123456789ABCDEF', 32)}", ""] + lines
        if spec.get("block"):
            lines = ["Version: GnuPG v2", ""] + lines + ["=" + pick(alnum, 4)]
        return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])
    raise ValueError(kind)


def pem_body_lines(pem: str) -> set[str]:
    return {line for line in pem.splitlines()[1:-1] if len(line) >= 8 and re.fullmatch(r"[A-Za-z0-9+/=]+", line)}


def fold(text: str, width: int, newline: str = "\n", offset: int = 7) -> str:
    """``text`` as if it started ``offset`` characters into a line of ``width``."""
    cuts = [0] + list(range(width - offset, len(text), width)) + [len(text)]
    return newline.join(text[a:b] for a, b in zip(cuts, cuts[1:]))


def wrap(text: str, width: int) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def embed(secret: str, form: str, rng: random.Random) -> str:
    """How a case's tool prints its secret."""
    data = secret.encode()
    b64, b64url = base64.b64encode, base64.urlsafe_b64encode
    forms = {
        "plain": lambda: secret,
        "plain_stripped": lambda: secret.strip(),
        "second_line": lambda: secret.splitlines()[1],
        "b64_0": lambda: b64(data + b"\n").decode(),
        "b64_1": lambda: b64(b"x" + data + b"\n").decode(),
        "b64_2": lambda: b64(b"xy" + data).decode(),
        "b64url_0": lambda: b64url(data).decode(),
        "b64url_1": lambda: b64url(b"x" + data + b"?>").decode(),
        "b64url_2": lambda: b64url(b"xy" + data + b"~").decode(),
        "b64_wrapped": lambda: wrap(b64(b"-" * 50 + data + b"-" * 50).decode(), 76),
        "b64_basic_auth": lambda: b64(b"user:" + data).decode(),
        "b64_blob": lambda: wrap(b64(rng.randbytes(101) + data + rng.randbytes(400)).decode(), 76),
        "url": lambda: quote(secret, safe=""),
        "url_plus": lambda: quote_plus(secret),
        "url_lower": lambda: re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(secret, safe="")),
        "json": lambda: json.dumps(secret, ensure_ascii=False)[1:-1],
        "json_ascii": lambda: json.dumps(secret)[1:-1],
        "json_slash": lambda: json.dumps(secret)[1:-1].replace("/", "\\/"),
        "json_twice": lambda: json.dumps(json.dumps(secret)[1:-1])[1:-1],
        "hex": lambda: data.hex(),
        "hex_upper": lambda: data.hex().upper(),
        "xxd_p": lambda: wrap((b"hdr:" + data + b":end").hex(), 60),
        "fold16": lambda: fold(secret, 16),
        "fold20": lambda: fold(secret, 20),
        "fold20_crlf": lambda: fold(secret, 20, "\r\n"),
        "crlf": lambda: secret.replace("\n", "\r\n"),
        "indent": lambda: "\n".join("    " + line for line in secret.splitlines()),
        "pem_head": lambda: "\n".join(secret.splitlines()[:6]),
        "pem_tail": lambda: "\n".join(secret.splitlines()[-6:]),
        "twice": lambda: secret + "\n\n" + secret,
    }
    return forms[form]()


def corpus_case(case: dict) -> tuple[str, str | None, dict[str, str], set[str]]:
    """(tool output, agent key, environment, strings the model must never see)."""
    rng = random.Random(case["id"])
    spec = dict(case["value"])
    value = make("literal" if "literal" in spec else spec.pop("kind"), spec.pop("length", 0), rng, **spec)
    output = case["output"].replace("{secret}", embed(value, case["form"], rng))
    env = {case["name"]: value} if case["source"] == "env" else {}
    agent_key = "sk-test-" + "".join(rng.choices(string.ascii_letters, k=24))
    agent_key = value if case["source"] == "agent_key" else agent_key
    if case["source"] in ("env", "agent_key"):
        forbidden = forbidden_forms(value)
    elif value.startswith("-----BEGIN"):
        forbidden = pem_body_lines(value)
    else:
        forbidden = {value, *(part for part in value.split(".")[1:] if len(part) >= 8)}
    return output, agent_key, env, forbidden


def leaks(forbidden: set[str], *texts: str) -> list[str]:
    """Forbidden strings found in any text, also once its line breaks are taken out."""
    flat = [t.replace("\r", "").replace("\n", "") for t in texts]
    return sorted(f for f in forbidden if any(f in t for t in (*texts, *flat)))
