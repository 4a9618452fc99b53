"""Redaction: credential names, the forms a secret takes, token shapes, and — through a real
model server on 127.0.0.1 — that no secret in any corpus case reaches the model's bytes."""

import asyncio
import base64
import contextvars
import json
import random
import re
import string
import threading
import time
from urllib.parse import quote, quote_plus

import pytest

import bettong_nb
from bettong_nb import capability, secrets
from bettong_nb.safety.secrets import REDACTED, redact
from support import REPO, TESTS
from support.servers import ChatScript, LoopbackServer, Reply, chat_message, tool_call
from support.secrets_corpus import (BENIGN, EXPOSURES, b64_core, corpus_case, fold, forbidden_forms, leaks, make,
                                    pem_body_lines)
from support.environment import quiet_environment  # noqa: F401  (autouse: no credential of this machine takes part)

CORPORA = TESTS / "corpora"

KEY = "Zq81kPWm42sRTj77dAx0"  # an ordinary secret value for the unit tests


# --- names and the environment ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["DEEPSEEK_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DB_PASSWORD",
                                  "SOME_CREDENTIALS", "auth_token", "PRIVATE_KEY", "MYSQL_PASSWD",
                                  "GPG_PASSPHRASE", "DB_PASS", "pass", "SMTP_PASS_FILE",
                                  # side effects of a substring match, kept from the original
                                  "SSH_AUTH_SOCK", "XAUTHORITY", "MONKEY", "AUTHOR"])
def test_credential_names(name):
    assert secrets.is_credential_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "PWD", "OLDPWD", "EDITOR", "COMPASS_URL",
                                  "BYPASS_PROXY", "PASSENGER_COUNT", "SHELL"])
def test_ordinary_names(name):
    assert not secrets.is_credential_name(name)


def test_credential_values_are_long_credential_named_values_only():
    env = {"API_KEY": KEY, "SHORT_KEY": "abc", "BLANK_TOKEN": "     \n   ", "PATH": "/usr/local/bin:/usr/bin",
           "HOME": "/home/someone", "DB_PASSWORD": KEY}
    assert secrets.credential_values(env) == [KEY]


def test_credential_values_read_os_environ_afresh(monkeypatch):
    assert secrets.credential_values() == []
    monkeypatch.setenv("FRESH_TOKEN", KEY)
    assert secrets.credential_values() == [KEY]
    assert redact(f"t={KEY}") == (f"t={REDACTED}", 1)
    monkeypatch.setenv("FRESH_TOKEN", "Another-Value-9876")
    assert redact(f"t={KEY} Another-Value-9876") == (f"t={KEY} {REDACTED}", 1)


def test_stripped_env_drops_credential_names_only(monkeypatch):
    env = {"PATH": "/bin", "HOME": "/h", "API_KEY": KEY, "DB_PASS": "x", "auth_token": "y", "COMPASS_URL": "z"}
    assert secrets.stripped_env(env) == {"PATH": "/bin", "HOME": "/h", "COMPASS_URL": "z"}
    monkeypatch.setenv("SOME_SECRET", KEY)
    assert "SOME_SECRET" not in secrets.stripped_env() and "PATH" in secrets.stripped_env()


def test_the_value_lookup_is_patchable_on_the_module(monkeypatch):
    monkeypatch.setattr(secrets, "credential_values", lambda env=None: ["patched-value-123"])
    assert redact("a patched-value-123 b") == (f"a {REDACTED} b", 1)


# --- the short-value rule and count semantics -------------------------------------------------

def test_values_shorter_than_eight_characters_are_not_secrets(monkeypatch):
    monkeypatch.setenv("SHORT_KEY", "abcdefg")
    monkeypatch.setenv("PADDED_KEY", "  abc  \n")
    assert redact("abcdefg abc", extra=["1234567", None, ""]) == ("abcdefg abc", 0)
    assert redact("abcdefgh", extra=["abcdefgh"]) == (REDACTED, 1)


def test_every_occurrence_of_every_value_and_unrelated_text_untouched():
    other = "second-secret-Value"
    text, count = redact(f"a {KEY} b {other} c {KEY}", extra=[KEY, other])
    assert (text, count) == (f"a {REDACTED} b {REDACTED} c {REDACTED}", 3)


def test_overlapping_and_touching_matches_are_one_redaction():
    longer = KEY + "-and-more"
    assert redact(f"[{longer}]", extra=[KEY, longer]) == (f"[{REDACTED}]", 1)
    assert redact(f"<{KEY}{KEY}>", extra=[KEY]) == (f"<{REDACTED}>", 1)
    assert redact(f"<{KEY} {KEY}>", extra=[KEY]) == (f"<{REDACTED} {REDACTED}>", 2)


def test_empty_and_none_come_back_unchanged():
    assert redact("", extra=[KEY]) == ("", 0)
    assert redact(None, extra=[KEY]) == (None, 0)
    assert redact("nothing secret", extra=[KEY]) == ("nothing secret", 0)


def test_non_ascii_text_around_a_secret_survives():
    text, count = redact(f"ключ: {KEY} — ☃ 你好", extra=[KEY])
    assert (text, count) == (f"ключ: {REDACTED} — ☃ 你好", 1)


def test_lone_surrogates_in_output_do_not_break_redaction():
    weird = "bad \udcff byte " + KEY
    assert redact(weird, extra=[KEY]) == ("bad \udcff byte " + REDACTED, 1)


# --- each form of a value ---------------------------------------------------------------------



@pytest.mark.parametrize("shift", [0, 1, 2])
@pytest.mark.parametrize("alphabet", [base64.b64encode, base64.urlsafe_b64encode], ids=["std", "url"])
def test_base64_at_every_alignment(shift, alphabet):
    value = "a~secret?value>with/awkward+bits"  # encodes with + / in one alphabet, - _ in the other
    stream = alphabet(b"xyz"[:shift] + value.encode() + b"trailer!").decode()
    core = b64_core(value.encode(), shift, alphabet)
    assert core in stream and len(core) >= len(value) * 4 // 3 - 2
    assert redact(f"blob: {stream} end", extra=[value]) == (f"blob: {stream.replace(core, REDACTED)} end", 1)


def test_base64_leftovers_are_at_most_two_characters_each_side():
    for prefix in [b"", b"x", b"xy", b"xyz"]:
        stream = base64.b64encode(prefix + KEY.encode() + b"!").decode()
        text, count = redact(stream, extra=[KEY])
        head, _, tail = text.partition(REDACTED)
        assert count == 1 and len(head) <= len(prefix) * 4 // 3 + 2 and len(tail) <= 4


@pytest.mark.parametrize("encode", [
    lambda v: quote(v, safe=""), lambda v: quote(v), quote_plus,
    lambda v: re.sub("%[0-9A-F]{2}", lambda m: m[0].lower(), quote(v, safe="")),
    lambda v: json.dumps(v)[1:-1], lambda v: json.dumps(v, ensure_ascii=False)[1:-1],
    lambda v: json.dumps(v)[1:-1].replace("/", "\\/"), lambda v: json.dumps(json.dumps(v)[1:-1])[1:-1],
    lambda v: v.encode().hex(), lambda v: v.encode().hex().upper(),
], ids=["url", "url-safe-slash", "url-plus", "url-lower", "json", "json-unicode", "json-slash", "json-twice",
        "hex", "hex-upper"])
def test_encoded_forms(encode):
    value = 'p@ss/wörd "quoted" & spaced+=1'
    assert encode(value) != value
    text, count = redact(f"<{encode(value)}>", extra=[value])
    assert (text, count) == (f"<{REDACTED}>", 1)


def test_hex_inside_a_longer_hex_dump():
    dump = ("00ff" + KEY.encode().hex() + "0a0b0c").upper()
    assert redact(f"xxd: {dump}", extra=[KEY]) == (f"xxd: 00FF{REDACTED}0A0B0C", 1)


def test_a_hex_value_inside_hashes_is_found_and_other_hashes_are_not():
    token = "0123456789abcdef" * 2
    text = f"sha {token}\nsha 3f9a1c2b7e4d5a6b8c9d0e1f2a3b4c5d6e7f8a9b\nsha ff{token}00"
    assert redact(text, extra=[token]) == (
        f"sha {REDACTED}\nsha 3f9a1c2b7e4d5a6b8c9d0e1f2a3b4c5d6e7f8a9b\nsha ff{REDACTED}00", 2)


def test_digits_only_value():
    assert redact("pin 0012345678 or 12345678", extra=["12345678"]) == (f"pin 00{REDACTED} or {REDACTED}", 2)


@pytest.mark.parametrize("width", [1, 5, 16, 20, 76])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_value_broken_across_lines(width, newline):
    folded = newline.join(KEY[i:i + width] for i in range(0, len(KEY), width))
    text, count = redact(f"before\n{folded}\nafter", extra=[KEY])
    assert (text, count) == (f"before\n{REDACTED}\nafter", 1)


def test_wrapped_base64_of_a_long_text_holding_the_value():
    blob = base64.b64encode(b"#" * 101 + KEY.encode() + b"#" * 300).decode()
    wrapped = "\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
    text, count = redact(wrapped, extra=[KEY])
    assert count == 1 and all(f not in text.replace("\n", "") for f in forbidden_forms(KEY))
    assert text.count("\n") <= wrapped.count("\n")  # line breaks outside the value stay


@pytest.fixture(params=[0, 100], ids=["few held", "many held"])
def held_keys(request, monkeypatch) -> list[str]:
    """Keys agents of this process hold: none, or more than one matcher takes with a call's own
    values (a long-lived kernel that built many agents)."""
    monkeypatch.setattr(secrets, "_held", set())
    rng = random.Random(request.param)
    keys = ["hk-" + "".join(rng.choice(string.ascii_letters) for _ in range(24)) for _ in range(request.param)]
    secrets.hold(keys)
    return keys


def test_random_placements_never_leak(held_keys):
    """Values of every alphabet, in every form, at random places in random text, folded at
    random widths: whatever survives, no form of a value does, however many keys are held."""
    rng = random.Random(20240501)
    alphabets = [string.ascii_letters + string.digits, "0123456789abcdef", string.digits,
                 string.printable.strip(), "äöü☃ключ" + string.ascii_lowercase]
    encoders = [lambda v: v, lambda v: v.encode().hex(), lambda v: quote(v, safe=""),
                lambda v: json.dumps(v)[1:-1],
                lambda v: base64.b64encode(rng.randbytes(rng.randint(0, 5)) + v.encode()).decode()]
    noise = string.ascii_letters + string.digits + "+/=-_ .:\n"
    for _ in range(300):
        value = "".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(8, 40)))
        printed = rng.choice(encoders)(value)
        text = "".join(rng.choice(noise) for _ in range(rng.randint(0, 60))) + printed + "".join(
            rng.choice(noise) for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.5:
            text = fold(text, rng.randint(8, 80), rng.choice(["\n", "\r\n"]), rng.randint(0, 7))
        out, count = redact(text, extra=[value])
        assert count >= 1 and leaks(forbidden_forms(value), out) == [], (value, text, out)


def test_a_calls_own_values_held_keys_shapes_and_url_passwords_are_found_together(held_keys):
    own = "0123456789abcdef0123"  # hex only: found in runs of hex digits, not by anchors
    shape = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    held = held_keys[-1] if held_keys else "no key held here"
    text = (f"own={own} held={held} tok={shape} url=https://me:pw-Zq81kP@db.example/x "
            f"b64={base64.b64encode(own.encode()).decode()} own-again={own}")
    out, count = redact(text, extra=[own])
    assert own not in out and shape not in out and "pw-Zq81kP" not in out and "MDEyMzQ1" not in out
    assert (held not in out) == bool(held_keys) and count == 5 + bool(held_keys)
    spans = secrets.redaction_spans(text, extra=[own])
    assert [text[a:b] for a, b in spans][:1] == [own] and len(spans) == count


def test_each_line_of_a_multi_line_value_counts():
    value = "first-line-Zq81kP\nsecond-line-Wm42sR"
    assert redact("> second-line-Wm42sR <", extra=[value]) == (f"> {REDACTED} <", 1)
    assert redact(f"> {value} <", extra=[value]) == (f"> {REDACTED} <", 1)


def test_a_padded_value_is_found_trimmed():
    assert redact(f"key={KEY};", extra=[f"  {KEY}\n"]) == (f"key={REDACTED};", 1)


def test_the_extra_values_may_hold_none_and_non_strings():
    assert redact(f"x {KEY}", extra=[None, KEY, 12345678]) == (f"x {REDACTED}", 1)


# --- token shapes -----------------------------------------------------------------------------





SHAPES = ["sk", "sk-proj", "sk-ant", "deepseek", "ghp", "gho", "ghu", "ghs", "ghr", "github_pat", "akia", "asia",
          "xoxb", "xoxp", "xoxa", "xoxr", "xoxs", "xoxo", "aiza", "jwt", "jwt_none"]
LENGTHS = {"sk": 48, "sk-proj": 120, "sk-ant": 95, "deepseek": 32, "github_pat": 82, "akia": 16, "asia": 16,
           "aiza": 35, "jwt": 0, "jwt_none": 0}


@pytest.mark.parametrize("kind", SHAPES)
@pytest.mark.parametrize("context", ["{}", "token={}&x=1", '{{"key": "{}"}}', "Bearer {}\n", "({})"])
def test_token_shapes_nobody_declared(kind, context):
    token = make(kind, LENGTHS.get(kind, 36 if kind.startswith("gh") else 40))
    text, count = redact(context.format(token))
    assert (text, count) == (context.format(REDACTED), 1)


@pytest.mark.parametrize("label", ["RSA", "EC", "DSA", "OPENSSH", "ENCRYPTED", ""])
def test_pem_private_key_blocks_keep_their_armour(label):
    pem = make("pem", 700, label=label)
    text, count = redact(f"$ cat key\n{pem}\n$ ")
    begin, end = pem.splitlines()[0], pem.splitlines()[-1]
    assert (text, count) == (f"$ cat key\n{begin}\n{REDACTED}\n{end}\n$ ", 1)


@pytest.mark.parametrize("slash", ["/", "\\/"], ids=["json", "json-escaped-slash"])
def test_pem_block_on_one_json_line(slash):
    pem = make("pem", 900, label="")
    text, count = redact(json.dumps({"private_key": pem, "client_email": "x@y"}).replace("/", slash))
    assert count == 1 and leaks(pem_body_lines(pem), text.replace("\\/", "/").replace("\\n", "\n")) == []
    assert json.loads(text)["client_email"] == "x@y"


def test_pem_cut_off_at_either_end():
    pem = make("pem", 1200, label="RSA")
    lines = pem.splitlines()
    head = "\n".join(lines[:6]) + "\n...[truncated]..."
    tail = "...[truncated]...\nsee below\n" + "\n".join(lines[-6:])
    for text in (head, tail):
        redacted, count = redact(text)
        assert count == 1 and all(line not in redacted for line in pem_body_lines(pem))
        assert "[truncated]" in redacted


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("slash", ["/", "\\/"], ids=["json", "json-escaped-slash"])
def test_pem_cut_off_before_its_begin_line_inside_a_json_string(newline, slash):
    # Read back from the END line, a JSON-escaped break is n\ and every body line must end there.
    for seed in range(20):
        pem = make("pem", 900 + seed * 37, label="RSA")
        lines = pem.splitlines()
        tail = newline.join(["[truncated]"] + lines[3:])
        text, count = redact(json.dumps({"log": tail}).replace("/", slash))
        plain = json.loads(text.replace("\\/", "/"))["log"]
        shown = {line for line in pem_body_lines(pem) if line in lines[3:]}
        assert count == 1 and len(shown) > 5 and leaks(shown, plain) == [], plain
        assert plain.startswith("[truncated]")


def test_a_missing_end_line_does_not_swallow_the_rest_of_the_output():
    pem = "\n".join(make("pem", 300).splitlines()[:-1])
    text, _ = redact(pem + "\n\n== 3 passed in 0.1s ==")
    assert text.endswith("== 3 passed in 0.1s ==")


@pytest.mark.parametrize("text", [case["text"] for case in BENIGN if "env" not in case])
def test_ordinary_text_is_not_mistaken_for_a_token(text):
    assert redact(text) == (text, 0)


@pytest.mark.parametrize("text", [
    "sk-" * 100_000,
    "x sk-" + "a-" * 200_000,
    "eyJ" * 100_000,
    "eyJ." * 100_000,
    "-----BEGIN PRIVATE KEY-----\n" * 10_000,
    "-----END PRIVATE KEY-----\n" * 10_000,
    "-----BEGIN PRIVATE KEY-----\n" + "A" * 300_000,
    "ghp_" * 100_000,
    "AKIA" * 100_000,
    "xoxb-" * 60_000,
    "k-" * 200_000,
    "a://" * 100_000 + "@",
    "x://u:" + "@" * 300_000,
    "h://u:p@" * 50_000,
    "a:\\/\\/" * 60_000 + "@",
    "s://" + "a:" * 200_000 + "@",
    "\n" * 300_000,
], ids=lambda t: repr(t[:12]))
def test_adversarial_input_takes_linear_time(text):
    started = time.process_time()
    redact(text, extra=[KEY])
    assert time.process_time() - started < 5  # backtracking would take minutes


def test_a_megabyte_with_fifty_secrets_is_redacted(monkeypatch):
    # How long it takes is bench W5's row (python -m bench).
    monkeypatch.syspath_prepend(str(REPO))
    from bench.bench_redact import workload
    text, values = workload()
    out, count = redact(text, extra=values)
    assert count > 100 and not any(v in out for v in values)


# --- credentials in URLs ------------------------------------------------------------------------

@pytest.mark.parametrize("url, expected", [
    ("https://me:pw@api.example/v1", f"https://me:{REDACTED}@api.example/v1"),
    ("https://TOKEN123@api.example/v1", f"https://{REDACTED}@api.example/v1"),
    ("https://git@api.example/v1", f"https://{REDACTED}@api.example/v1"),  # in a base_url any userinfo is a login
    ("redis://:p@ss@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
    ("https://api.example/v1?api_key=k1&x=1&access_token=t", f"https://api.example/v1?api_key={REDACTED}&x=1&access_token={REDACTED}"),
    ("https://u:p@api.example/v1?key=k", f"https://u:{REDACTED}@api.example/v1?key={REDACTED}"),
    ("https://api.example/v1", "https://api.example/v1"),
    ("http://127.0.0.1:8000/v1?x=1", "http://127.0.0.1:8000/v1?x=1"),
    ("http://u:p@[::1", f"http://u:{REDACTED}@[::1"),  # not parseable: the text rule still applies
    ("", ""),
])
def test_url_without_credentials(url, expected):
    assert secrets.url_without_credentials(url) == expected


def test_userinfo_is_redacted_for_any_scheme():
    for scheme in ["postgres", "postgresql+psycopg2", "mysql", "redis", "rediss", "amqp", "amqps", "mongodb",
                   "mongodb+srv", "https", "http", "ftp", "sftp", "smtp", "ldap", "s3", "x-custom.scheme"]:
        text, count = redact(f"url: {scheme}://user:Zq81-pw@host/db end")
        assert (text, count) == (f"url: {scheme}://user:{REDACTED}@host/db end", 1)


# --- credential files -----------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    ".ssh/id_rsa", "home/u/.ssh/config", "/home/u/.gnupg/private-keys-v1.d/x.key", "keys/deploy_ed25519", "a.ppk",
    "cert.PFX", "bundle.p12", "store.jks", "release.keystore", "AuthKey_ABC.p8", "vault.kdbx", ".env", "app/.env.local",
    "/home/u/.aws/credentials", ".aws/sso/cache/abc.json", ".config/gcloud/application_default_credentials.json",
    ".config/gcloud/credentials.db", ".config/gcloud/access_tokens.db", ".config/gcloud/legacy_credentials/me/adc.json",
    "credentials.json", "client_secret_123.apps.googleusercontent.com.json", "service-account.json",
    "service_account_key.json", ".azure/accessTokens.json", ".azure/msal_token_cache.json", ".azure/msal_token_cache.bin",
    ".azure/service_principal_entries.json", "msal_token_cache.bin", ".databrickscfg", ".kaggle/kaggle.json",
    ".cache/huggingface/token", ".config/gh/hosts.yml", ".s3cfg", ".boto", ".config/rclone/rclone.conf",
    ".streamlit/secrets.toml", ".npmrc", ".pypirc", ".gem/credentials", ".cargo/credentials", ".cargo/credentials.toml",
    ".composer/auth.json", ".docker/config.json", ".dockercfg", ".kube/config", "kubeconfig", "prod.kubeconfig",
    ".terraformrc", "terraform.rc", ".terraform.d/credentials.tfrc.json", "terraform.tfstate",
    "terraform.tfstate.backup", ".vault-token", ".git-credentials", ".netrc", "_netrc", ".pgpass", ".my.cnf",
    ".mylogin.cnf", "public_html/.htpasswd", "/proc/self/environ", "/proc/12/task/12/environ", "/proc/12/mem",
    "sub/../.env", "C:\\Users\\me\\.ssh\\id_rsa", "/HOME/U/.SSH/ID_RSA", "data/x/../../.npmrc",
])
def test_credential_path_list(path):
    assert secrets.is_credential_path(path)


@pytest.mark.parametrize("path", [
    ".ssh", ".ssh/", "/home/u/.gnupg", ".aws", ".aws/config", ".azure/azureProfile.json", ".kube", ".kube/cache/x.json",
    ".docker/daemon.json", "docker/config.json", "kube/config", ".envrc", "environment.md", "keyboard.md",
    "notes.key.txt", "my.ssh.txt", "monkey", "pem", "rsa.md", "credentials.md", "tokens.csv", "secrets.py",
    "/proc/12/cmdline", "/proc/12/status", "data/moons.csv", ".gitconfig", "known_hosts.txt", "kaggle.json.md",
])
def test_not_credential_paths(path):
    assert not secrets.is_credential_path(path)


def test_every_listed_pattern_refuses_something():
    for pattern in secrets.CREDENTIAL_PATHS:
        example = pattern.replace("**", "x/y").replace("*", "a").replace("?", "-")
        assert secrets.is_credential_path("/home/u/" + example), pattern
        assert secrets.is_credential_path(example.upper()), pattern


# --- switching it off -------------------------------------------------------------------------

def test_revealed_turns_redaction_off_only_inside():
    assert secrets.redacting()
    with secrets.revealed():
        assert not secrets.redacting()
        assert redact(f"k {KEY}", extra=[KEY]) == (f"k {KEY}", 0)
        assert redact("sk-" + "a1" * 20) == ("sk-" + "a1" * 20, 0)
    assert secrets.redacting()
    assert redact(f"k {KEY}", extra=[KEY]) == (f"k {REDACTED}", 1)


def test_revealed_is_restored_after_an_exception():
    with pytest.raises(RuntimeError):
        with secrets.revealed():
            raise RuntimeError("boom")
    assert secrets.redacting()


def test_revealed_does_not_leak_into_other_threads_or_tasks():
    seen = {}
    with secrets.revealed():
        worker = threading.Thread(target=lambda: seen.setdefault("thread", secrets.redacting()))
        worker.start()
        worker.join()
        seen["copied context"] = contextvars.copy_context().run(secrets.redacting)

    async def main():
        async def other():
            return secrets.redacting()
        task = asyncio.ensure_future(other())  # created outside revealed()
        with secrets.revealed():
            return await task

    seen["task"] = asyncio.run(main())
    assert seen == {"thread": True, "copied context": False, "task": True}


# --- through capability.invoke ----------------------------------------------------------------

def leaky(output, *, via="return"):
    async def async_handler():
        return output

    def handler():
        if via.startswith("raise"):
            raise RuntimeError(json.dumps({"detail": output}) if via == "raise_dict" else output)
        return {"result": {"auth": output}} if via == "return_dict" else output

    return {"id": "leaky", "instructions": None,
            "tools": [{"name": "leak", "description": "Prints something.", "parameters": {},
                       "handler": async_handler if via == "async" else handler}]}


@pytest.mark.parametrize("via", ["return", "raise", "return_dict", "raise_dict", "async"])
def test_invoke_redacts_results_and_errors_of_your_own_tools(monkeypatch, via):
    monkeypatch.setenv("MY_TOOL_TOKEN", KEY)
    reg = capability.registry([leaky(f"token: {KEY}", via=via)])
    text, count = asyncio.run(capability.invoke(reg, "leak", {}))
    assert count == 1 and KEY not in text and REDACTED in text
    assert text.startswith("ERROR: ") == via.startswith("raise")
    with secrets.revealed():
        raw, count = asyncio.run(capability.invoke(reg, "leak", {}))
    assert count == 0 and KEY in raw


# --- the exposure corpus ----------------------------------------------------------------------











def test_the_exposure_corpus_is_big_and_varied():
    assert len(EXPOSURES) >= 100 and len({c["id"] for c in EXPOSURES}) == len(EXPOSURES)
    assert {c["source"] for c in EXPOSURES} == {"env", "agent_key", "shape"}
    forms = {c["form"] for c in EXPOSURES}
    assert {"plain", "b64_0", "b64_1", "b64_2", "url", "json", "hex", "fold20", "xxd_p", "crlf"} <= forms
    assert {"raise", "return_dict", "async"} <= {c.get("via") for c in EXPOSURES}


@pytest.mark.parametrize("case", EXPOSURES, ids=lambda c: c["id"])
def test_exposure_corpus_redact(case, monkeypatch):
    output, agent_key, env, forbidden = corpus_case(case)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert forbidden and not any(f in REDACTED for f in forbidden)
    assert leaks(forbidden, output), "the case must actually expose its secret"
    text, count = redact(output, extra=[agent_key])
    assert count > 0 and leaks(forbidden, text) == []


@pytest.mark.parametrize("case", [c for c in BENIGN if "env" in c], ids=lambda c: c["id"])
def test_benign_corpus_with_environment(case, monkeypatch):
    for name, value in case["env"].items():
        monkeypatch.setenv(name, value)
    assert redact(case["text"], extra=["sk-test-agent-key-Zq81"]) == (case["text"], 0)


# --- the exposure corpus at a model server: the bytes the model receives ----------------------

@pytest.fixture(scope="module")
def model_server():
    with LoopbackServer(lambda request: Reply.json({"error": {"message": "no script"}}, status=500)) as server:
        yield server


def run_at_server(server, cap, agent_key, *, stream=False):
    server.requests.clear()
    server.handler = ChatScript([chat_message(tool_calls=[tool_call("leak", {})]), chat_message("done")])
    result = bettong_nb.openai(base_url=server.url, api_key=agent_key, capabilities=[cap], stream=stream).run("go")
    assert result.output == "done" and len(server.requests) == 2
    return result, server.requests


def tool_contents(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("case", EXPOSURES, ids=lambda c: c["id"])
def test_exposure_corpus_at_the_model(case, monkeypatch, model_server):
    output, agent_key, env, forbidden = corpus_case(case)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result, requests = run_at_server(model_server, leaky(output, via=case.get("via", "return")), agent_key)
    assert result.redactions > 0
    [content] = tool_contents(requests[1].json())
    assert content.startswith("ERROR: ") == case.get("via", "").startswith("raise")
    for request in requests:
        raw = request.body.decode("utf-8")
        assert leaks(forbidden, raw, *tool_contents(request.json())) == []


@pytest.mark.parametrize("case", [c for c in EXPOSURES if c["id"] in (
    "env-urlsafe-b64_1", "agent-key-plain", "shape-github-ghp", "pem-rsa", "env-unicode-json")], ids=lambda c: c["id"])
def test_exposure_corpus_at_a_streaming_model(case, monkeypatch, model_server):
    output, agent_key, env, forbidden = corpus_case(case)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result, requests = run_at_server(model_server, leaky(output, via=case.get("via", "return")), agent_key, stream=True)
    assert result.redactions > 0 and requests[1].json().get("stream")
    assert leaks(forbidden, requests[1].body.decode(), *tool_contents(requests[1].json())) == []


def test_the_count_reaches_the_run_result_but_never_the_secret(monkeypatch, model_server):
    monkeypatch.setenv("SERVICE_TOKEN", KEY)
    output = f"{KEY} and {KEY}, also {make('ghp', 36)}"
    result, requests = run_at_server(model_server, leaky(output), "sk-test-key-123456")
    assert result.redactions == 3 and result.tool_calls[0].result.count(REDACTED) == 3
    assert KEY not in repr(result.tool_calls) and KEY.encode() not in requests[1].body


def test_revealed_run_sends_the_raw_output(monkeypatch, model_server):
    monkeypatch.setenv("SERVICE_TOKEN", KEY)
    with secrets.revealed():
        result, requests = run_at_server(model_server, leaky(f"token {KEY}"), "sk-test-key-123456")
    assert result.redactions == 0 and KEY in tool_contents(requests[1].json())[0]
