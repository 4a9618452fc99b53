"""The course policy: found in Jupyter's config folders or BETTONG_NB_POLICY, merged
most-restrictively, and obeyed by every run built in Python (sync, async, sessions, batches)
before its first request."""

from __future__ import annotations

import asyncio
import json

import pytest

import bettong_nb
from bettong_nb.core import approvals, policy
from support.servers import ChatScript, LoopbackServer, chat_message, tool_call

KEY = "sk-test-0000"


@pytest.fixture
def course(tmp_path, monkeypatch):
    """``course(rules)`` writes rules as the policy BETTONG_NB_POLICY names; the config folders
    point into tmp_path, so no policy of this machine counts."""
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "more"))
    monkeypatch.delenv("BETTONG_NB_POLICY", raising=False)
    policy.reset_spending()

    def write(rules: dict, *, where=None):
        path = where or tmp_path / "policy.json"
        path.write_text(json.dumps(rules))
        if where is None:
            monkeypatch.setenv("BETTONG_NB_POLICY", str(path))
        return path

    write.config = config
    yield write
    policy.reset_spending()


def answers(n: int):
    """``n`` answers "ok", each of 100 + 2 tokens (a request's estimate here is about 90)."""
    usage = {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}
    return ChatScript([chat_message("ok", usage=usage) for _ in range(n)])


def on(server, **options):
    return bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY, model="course-model", **options)


# --- the file ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rules, key", [
    ({"allowed_provider": ["openai"]}, "allowed_provider"),
    ({"allowed_models": "course-model"}, "allowed_models"),
    ({"allowed_models": [3]}, "allowed_models"),
    ({"token_budget": 5000}, "token_budget"),
    ({"token_budget": {"week": 5}}, "token_budget"),
    ({"token_budget": {"session": -1}}, "token_budget.session"),
    ({"token_budget": {"session": 1.5}}, "token_budget.session"),
    ({"cost_budget": {"kernel": "2"}}, "cost_budget.kernel"),
    ({"cost_budget": {"kernel": True}}, "cost_budget.kernel"),
    ({"approvals_required": "yes"}, "approvals_required"),
    ({"message": ["x"]}, "message"),
    ({"locked_folders": "/exams"}, "locked_folders"),
])
def test_a_bad_key_or_value_is_an_error_naming_the_file_and_the_key(course, rules, key):
    path = course(rules)
    with pytest.raises(policy.PolicyError) as caught:
        policy.current()
    assert str(path) in str(caught.value) and key in str(caught.value)


def test_a_file_that_is_not_a_json_object_or_is_missing_is_an_error(course, tmp_path, monkeypatch):
    path = tmp_path / "policy.json"
    path.write_text("[1, 2]")
    monkeypatch.setenv("BETTONG_NB_POLICY", str(path))
    with pytest.raises(policy.PolicyError, match="JSON object"):
        policy.current()
    path.write_text("{not json")
    with pytest.raises(policy.PolicyError, match="cannot read"):
        policy.current()
    monkeypatch.setenv("BETTONG_NB_POLICY", str(tmp_path / "gone.json"))
    with pytest.raises(policy.PolicyError, match="no such course policy file"):  # never silently lifted
        policy.current()


def test_no_file_no_policy(course):
    assert policy.current() is None


def test_files_merge_and_the_stricter_rule_wins(course, tmp_path):
    admin = course({"allowed_models": ["course-model", "big-model"], "token_budget": {"session": 500},
                    "disallowed_capabilities": ["shell"]}, where=course.config / policy.FILENAME)
    later = course({"allowed_models": ["course-model", "other"], "token_budget": {"session": 9999, "kernel": 700},
                    "disallowed_capabilities": ["python"], "approvals_required": True})
    rules = policy.current()
    assert rules.allowed_models == ("course-model",)
    assert rules.token_budget == {"session": 500, "kernel": 700}
    assert set(rules.disallowed_capabilities) == {"shell", "python"} and rules.approvals_required
    rows = {rule: source for rule, _, source in rules.rows()}
    assert str(admin) in rows["allowed_models"] and str(later) in rows["allowed_models"]
    assert rows["approvals_required"] == str(later)
    # A looser file (a student's) loosens nothing.
    course({"allowed_models": ["any-model"], "approvals_required": False})
    assert policy.current().allowed_models == () and policy.current().approvals_required is False
    # ...that one replaced `later` as the variable's file; the admin's file still counts:
    assert policy.current().token_budget == {"session": 500}


def test_a_file_in_jupyter_config_path_counts(course, tmp_path):
    (tmp_path / "more").mkdir()
    course({"allowed_models": ["x"]}, where=tmp_path / "more" / policy.FILENAME)
    assert policy.current().allowed_models == ("x",)


# --- the rules, on real runs ------------------------------------------------------------------

def refused(server, run, *words):
    before = len(server.requests)
    with pytest.raises(bettong_nb.PolicyError) as caught:
        run()
    text = str(caught.value)
    assert "\n" not in text and all(w in text for w in words), text
    assert len(server.requests) == before  # refused before any request
    return text


def test_providers_base_urls_and_models(course):
    path = course({"allowed_providers": ["openai"], "allowed_models": ["course-model"],
                   "message": "Ask your teacher."})
    with LoopbackServer(answers(1)) as server:
        refused(server, lambda: bettong_nb.deepseek(base_url=server.url, api_key=KEY, model="course-model").run("x"),
                "'deepseek'", "allowed_providers", str(path), "Ask your teacher.")
        refused(server, lambda: on(server).run("x", model="gpt-big"), "'gpt-big'", "allowed_models")
        refused(server, lambda: bettong_nb.agent(provider=lambda request: None).run("x"), "allowed_providers")
        assert on(server).run("hi").output == "ok"
    with LoopbackServer(answers(1)) as server:
        course({"allowed_base_urls": [server.url + "/v1/"]})  # a trailing slash is the same URL
        assert on(server).run("hi").output == "ok"
        course({"allowed_base_urls": ["https://gateway.example/v1"]})
        refused(server, lambda: on(server).run("x"), "allowed_base_urls", server.url)


def test_disallowed_capabilities_by_id_and_kind(course, tmp_path):
    from bettong_nb import capabilities as caps

    course({"disallowed_capabilities": ["Shell", "mcp", "python"]})  # any case
    with LoopbackServer(answers(1)) as server:
        refused(server, lambda: on(server, capabilities=[caps.shell(root=tmp_path)]).run("x"), "'shell'")
        mcp = caps.mcp(command=["true"], id="wiki")  # a chosen id does not hide its kind
        refused(server, lambda: on(server, capabilities=[mcp]).run("x"), "disallowed_capabilities")
        assert on(server, capabilities=[caps.filesystem(root=tmp_path)]).run("x").output == "ok"


def test_session_budget_per_conversation_and_kernel_budget_across_agents(course):
    course({"token_budget": {"session": 150}})
    with LoopbackServer(answers(4)) as server:
        chat = on(server).session()
        assert chat.run("hi").done
        stopped = chat.run("again")
        assert stopped.stop_reason == "budget" and "session token budget of 150" in stopped.reason
        assert on(server).session().run("hi").done  # another conversation has its own
        assert on(server).run("hi").done and on(server).run("hi").done  # a lone run is its own session
    course({"token_budget": {"kernel": 150}})
    policy.reset_spending()
    with LoopbackServer(answers(2)) as server:
        assert on(server).run("hi").done
        stopped = on(server, max_steps=3).run("hi")  # a different agent: the same kernel
        assert stopped.stop_reason == "budget" and "kernel token budget" in stopped.reason
        assert len(server.requests) == 1


def test_cost_budget_counts_at_the_prices_and_stops_spending(course):
    course({"cost_budget": {"kernel": 0.0005}})
    prices = {"input": 1.0, "output": 2.0}  # per million tokens: an answer costs $0.000104
    with LoopbackServer(answers(20)) as server:
        results = [on(server, prices=prices).run("hi") for _ in range(12)]
    assert results[0].done and results[-1].stop_reason == "budget"
    assert "kernel cost budget" in results[-1].reason
    assert len(server.requests) == 4  # the 5th would pass $0.0005 with its own estimate


def test_cost_budget_counts_what_the_gateway_billed_and_fails_closed_without_a_bill(course):
    # No prices: the course gateway's bill for each answer is what the budget counts.
    course({"cost_budget": {"session": 0.01}})
    billed = {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102, "cost": 0.004}
    with LoopbackServer(ChatScript([chat_message("ok", usage=billed) for _ in range(5)])) as server:
        chat = on(server).session()
        outcomes = [chat.run("hi") for _ in range(4)]
    assert [r.done for r in outcomes] == [True, True, True, False]
    assert "session cost budget" in outcomes[-1].reason and len(server.requests) == 3
    # An answer nobody can cost (no bill, no prices): the budget cannot be kept, so the next request waits.
    with LoopbackServer(answers(3)) as server:
        chat = on(server).session()
        assert chat.run("hi").done
        stopped = chat.run("again")
    assert stopped.stop_reason == "budget" and "cannot be kept" in stopped.reason and "prices=" in stopped.reason
    assert len(server.requests) == 1


def note_tool(seen):
    def note(text: str) -> str:
        """Note something."""
        seen.append(text)
        return "noted"
    return {"id": "notes", "instructions": None, "tools": [bettong_nb.tool(note)]}


def test_approvals_required_denies_headless_and_asks_a_person(course):
    course({"approvals_required": True})
    seen: list = []

    def turns():
        return ChatScript([chat_message(tool_calls=[tool_call("note", {"text": "a"})]), chat_message("done")])

    with LoopbackServer(turns()) as server:  # no person here (no terminal, no notebook): denied
        result = on(server, capabilities=[note_tool(seen)], approve_fn=True).run("x")
    assert seen == [] and result.tool_calls[0].status == "denied"
    assert "requires a person's approval" in result.tool_calls[0].reason

    async def clicks_yes(request):
        return approvals._person_said(request)  # what the notebook's button gives

    with LoopbackServer(turns()) as server, approvals.person(clicks_yes):
        result = on(server, capabilities=[note_tool(seen)]).run("x")
    assert seen == ["a"] and result.tool_calls[0].status == "ok"
    with LoopbackServer(turns()) as server, approvals.person(clicks_yes):  # the user's own no still stands
        result = on(server, capabilities=[note_tool(seen)], approve_fn=False).run("x")
    assert seen == ["a"] and result.tool_calls[0].status == "denied"


def test_async_runs_and_batches_obey(course):
    course({"allowed_models": ["course-model"], "token_budget": {"kernel": 250}})
    with LoopbackServer(answers(5)) as server:
        with pytest.raises(bettong_nb.PolicyError):
            asyncio.run(on(server).arun("x", model="other"))
        batch = on(server).map(["a", "b", "c", "d"], concurrency=1, progress=False)
        results = list(batch)
    assert sum(1 for r in results if getattr(r, "done", False)) == 2  # 102 tokens each, 250 for the kernel
    assert len(server.requests) == 2
    with LoopbackServer(answers(1)) as server:
        batch = on(server).map(["a"], model="other", progress=False)
    assert isinstance(batch[0].error, bettong_nb.PolicyError) and "allowed_models" in batch[0].reason
    assert server.requests == []


# --- the exam lock, as judged from a notebook's metadata and path -----------------------------

@pytest.mark.parametrize("agent", ["off", "OFF", " Off ", False])
def test_the_lock_reads_every_spelling_of_off(agent):
    assert "exam lock" in policy.notebook_lock(None, metadata={"bettong_nb": {"agent": agent}})


@pytest.mark.parametrize("metadata", [{}, {"bettong_nb": {"agent": "on"}}, {"bettong_nb": "off"},
                                      {"bettong_nb": {"agent": None}}])
def test_other_metadata_does_not_lock(metadata):
    assert policy.notebook_lock(None, metadata=metadata) is None


def test_locked_folders_lock_what_is_under_them_and_nothing_beside(course, tmp_path):
    exams = tmp_path / "exams"
    (exams / "week1").mkdir(parents=True)
    (tmp_path / "exams2").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "link").symlink_to(exams / "week1")
    course({"locked_folders": [str(exams) + "/"]})
    rules = policy.current()

    def locked(path):
        return policy.notebook_lock(rules, metadata={}, path=str(path)) is not None

    assert locked(exams / "final.ipynb") and locked(exams / "week1" / "a.ipynb")
    assert locked(tmp_path / "elsewhere" / "link" / "a.ipynb")  # a symlink into the folder
    assert locked(tmp_path / "exams" / ".." / "exams" / "b.ipynb")
    assert not locked(tmp_path / "exams2" / "a.ipynb") and not locked(tmp_path / "elsewhere" / "a.ipynb")
