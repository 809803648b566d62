"""Try summaries (R-44): what each try did, kept beside the journal for the configured days, masked and encrypted."""

from __future__ import annotations

import datetime
import json

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from cryptography.fernet import Fernet
from durable_backends import FakeTaskStateStore
from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage
from airflow.providers.common.ai.durable.airflow.summaries import (
    approvals_of,
    retention_days,
    steps_of,
    try_summary,
    write_summary,
)
from airflow.providers.common.ai.durable.airflow.summary_reading import read_summaries
from airflow.providers.common.ai.durable.airflow.summary_stores import (
    SUMMARY_KEY_PREFIX,
    ObjectStorageSummaries,
    TaskStateStoreSummaries,
)
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.stats import JournalStats
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

IDS = {"dag_id": "dag", "run_id": "manual__2026-11-30", "task_id": "agent", "map_index": -1}
NOW = datetime.datetime(2026, 11, 30, 12, tzinfo=datetime.timezone.utc)
SECRET = "sk-summary-secret-0123456789abcdef"


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())


def stats_of_a_try_that_diverged() -> JournalStats:
    stats = JournalStats()
    stats.replayed.update({"model": 2, "tool": 1})
    stats.ran_live.update({"model": 1})
    stats.tokens_saved, stats.requests_saved = 240, 2
    stats.divergences.append(("1.3", "model 'gpt-4.1' at 1.3", f"the instructions changed ({SECRET})"))
    stats.not_recorded.append(f"tool 'pay' at 1.4: the store refused it: {SECRET}")
    return stats


def test_a_summary_says_what_replayed_ran_live_saved_and_why_it_diverged_with_secrets_masked():
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret(SECRET)
    summary = try_summary(stats_of_a_try_that_diverged(), try_number=2, outcome="success", now=NOW, days=3)
    assert summary["usage"]["replayed"] == {"model": 2, "tool": 1}
    assert summary["usage"]["saved"] == {"requests": 2, "tokens": 240, "cost_usd": 0.0}
    assert summary["divergences"] == [
        {"key": "1.3", "step": "model 'gpt-4.1' at 1.3", "reason": "the instructions changed (***)"}
    ]
    assert SECRET not in json.dumps(summary)
    assert summary["expires_at"] == "2026-12-03T12:00:00+00:00"


def test_in_the_task_state_store_a_summary_is_kept_encrypted_with_the_configured_retention(key, monkeypatch):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__TRY_SUMMARY_RETENTION_DAYS", "3")
    accessor = FakeTaskStateStore()
    write_summary(TaskStateStoreSummaries(accessor), DurableJournal(InMemoryStorage()), try_number=1, outcome="failed")
    stored = json.loads(accessor.rows[f"{SUMMARY_KEY_PREFIX}1"])
    assert stored.startswith("fernet:")
    assert accessor.retention[f"{SUMMARY_KEY_PREFIX}1"] == datetime.timedelta(days=3)
    [summary] = read_summaries({1: stored}, now=datetime.datetime.now(tz=datetime.timezone.utc))
    assert (summary["try_number"], summary["outcome"]) == (1, "failed")


def test_under_the_cache_path_summaries_outlive_the_journal_deleted_after_success(tmp_path, key):
    base = UPath(f"file://{tmp_path}/cache")
    journal = ObjectStorageStorage(base, **IDS)
    journal.write("1.1", "{}")
    summaries = ObjectStorageSummaries(base, **IDS)
    for try_number in (1, 2):
        write_summary(summaries, DurableJournal(InMemoryStorage()), try_number=try_number, outcome="success")

    journal.delete_all([])

    assert journal.read("1.1") is None
    assert sorted(summaries.read_all()) == [1, 2]
    # Under the DAG run's folder: the documented clean-up removes them with it.
    assert all("run_id=manual__2026-11-30" in str(path) for path in (tmp_path / "cache").rglob("try=*.json"))


def test_an_expired_summary_is_not_shown_and_one_that_cannot_be_read_says_so(key):
    fresh = try_summary(JournalStats(), try_number=2, outcome="success", now=NOW, days=1)
    expired = try_summary(JournalStats(), try_number=1, outcome="failed", now=NOW - datetime.timedelta(days=2), days=1)
    texts = {1: json.dumps(expired), 2: json.dumps(fresh), 3: "fernet:not-a-token"}
    assert read_summaries(texts, now=NOW) == [
        {**fresh, "steps_not_listed": None, "budget": None, "unreadable": []},  # few steps, no budget
        {"try_number": 3, "problem": "this summary cannot be read"},
    ]


def test_zero_days_keeps_no_summary(monkeypatch):
    monkeypatch.setenv("AIRFLOW__COMMON_AI__TRY_SUMMARY_RETENTION_DAYS", "0")
    accessor = FakeTaskStateStore()
    write_summary(TaskStateStoreSummaries(accessor), DurableJournal(InMemoryStorage()), try_number=1, outcome="success")
    assert accessor.rows == {}


@pytest.mark.parametrize("value", ["-1", "a week", "1.5"])
def test_a_retention_that_is_not_a_whole_number_of_days_is_refused_naming_the_option(monkeypatch, value):
    from airflow.exceptions import AirflowConfigException

    monkeypatch.setenv("AIRFLOW__COMMON_AI__TRY_SUMMARY_RETENTION_DAYS", value)
    with pytest.raises(
        AirflowConfigException, match=r"\[common.ai\] try_summary_retention_days must be a whole number"
    ):
        retention_days()


def test_a_store_that_fails_never_fails_the_task(caplog):
    class Refusing(FakeTaskStateStore):
        def set(self, key, value, *, retention=None):
            raise ConnectionError("the API server is gone")

    write_summary(
        TaskStateStoreSummaries(Refusing()), DurableJournal(InMemoryStorage()), try_number=1, outcome="failed"
    )
    assert "could not keep this try's summary" in caplog.text


def test_the_summary_so_far_is_kept_after_each_top_level_run_while_the_try_runs(key):
    @function_tool
    def weather(city: str) -> str:
        """The weather."""
        return "sunny"

    kept = []
    host = current_host().for_try(1, after_each_run=lambda journal: kept.append(dict(journal.stats.ran_live)))
    journal = DurableJournal(InMemoryStorage(), host=host)
    model = ScriptedModel([[function_call("weather", {"city": "Oslo"}, call_id="c1")], [assistant_message("ok")]])
    with journal_scope(journal):
        run_durably_sync(Agent(name="a", model=model, tools=[weather]), "Weather?")
        run_durably_sync(Agent(name="b", model=ScriptedModel([[assistant_message("ok")]])), "Hi")
    assert kept == [{"model": 2, "tool": 1}, {"model": 3, "tool": 1}]


def test_the_approvals_a_try_reached_are_in_its_summary_with_their_decisions():
    storage = InMemoryStorage()
    first = DurableJournal(storage)
    with first.run() as run:
        run.claim("model", "m", "asks 1")
        run.claim("approval", "refund", "refund 42").record({"approved": True, "by": "alice"})
        run.claim("approval", "delete_account", "delete 7")  # no answer yet
    assert approvals_of(first) == [
        {"key": "1.2", "tools": "refund", "decision": "approved by alice", "replayed": False},
        {"key": "1.3", "tools": "delete_account", "decision": "waiting for an answer", "replayed": False},
    ]
    second = DurableJournal(storage)
    with second.run() as run:
        run.claim("model", "m", "asks 1")
        run.claim("approval", "refund", "refund 42")
    assert approvals_of(second) == [
        {"key": "1.2", "tools": "refund", "decision": "approved by alice", "replayed": True}
    ]


def test_a_summary_with_fields_of_other_types_shows_what_can_be_read_and_names_what_cannot():
    stored = {
        "format": "1",
        "outcome": ["failed"],
        "written_at": 1764500000,
        "expires_at": "2999-01-01T00:00:00",  # no zone: taken as UTC
        "usage": {
            "requests": 2.0,
            "total_tokens": 30,
            "models": {"gpt-4.1": {"requests": True, "total_tokens": 30}, "other": []},
            "saved": None,
            "replayed": {"model": 2, "tool": "1"},
            "live": [],
        },
        "divergences": [None, {"key": "1.3", "step": ["x"], "reason": "the instructions changed"}],
        "not_recorded": "one",
        "approvals": [{"key": "1.2", "tools": "refund", "decision": "approved by alice", "replayed": "yes"}],
        "from_a_later_release": {"deep": [[[["junk"]]]]},
    }
    [summary] = read_summaries({4: json.dumps(stored)}, now=NOW)
    assert summary["try_number"] == 4
    assert (summary["format"], summary["outcome"], summary["written_at"]) == (None, None, None)
    assert summary["expires_at"] == "2999-01-01T00:00:00"
    assert summary["usage"]["total_tokens"] == 30
    assert summary["usage"]["models"] == {
        "gpt-4.1": {"requests": None, "input_tokens": None, "output_tokens": None, "total_tokens": 30, "cost_usd": None}
    }
    assert summary["usage"]["replayed"] == {"model": 2}
    assert summary["divergences"] == [{"key": "1.3", "step": None, "reason": "the instructions changed"}]
    assert summary["approvals"] == [
        {"key": "1.2", "tools": "refund", "decision": "approved by alice", "replayed": None}
    ]
    assert summary["unreadable"] == [
        "format",
        "outcome",
        "written_at",
        "usage.requests",
        "usage.models.gpt-4.1.requests",
        "usage.models.other",
        "usage.saved",
        "usage.replayed.tool",
        "usage.live",
        "divergences[0]",
        "divergences[1].step",
        "not_recorded",
        "approvals[0].replayed",
    ]
    assert "from_a_later_release" not in summary


@pytest.mark.parametrize(
    ("expires_at", "shown", "unreadable"),
    [("2000-01-01T00:00:00", False, []), ("next week", True, ["expires_at"]), (7, True, ["expires_at"])],
)
def test_a_summary_expires_by_its_expiry_read_as_utc_and_one_whose_expiry_cannot_be_read_is_shown(
    expires_at, shown, unreadable
):
    summaries = read_summaries({1: json.dumps({"expires_at": expires_at})}, now=NOW)
    assert [summary["unreadable"] for summary in summaries] == ([unreadable] if shown else [])


def test_huge_values_and_odd_unicode_in_a_summary_are_cut_to_what_a_page_can_send():
    stored = {
        "outcome": "\ud800 failed \u202e" + "x" * 1_000_000,
        "not_recorded": ["step"] * 100_000,
        "usage": {"live": {f"kind {n}": n for n in range(10_000)}},
    }
    [summary] = read_summaries({1: json.dumps(stored)}, now=NOW)
    assert summary["outcome"].startswith("\\ud800 failed \u202e")
    assert len(summary["outcome"]) < 3000
    summary["outcome"].encode("utf-8")  # what a response body must be
    assert len(summary["not_recorded"]) == len(summary["usage"]["live"]) == 200
    assert summary["unreadable"] == ["usage.live (not shown: 9800 more)", "not_recorded (not shown: 99800 more)"]


def test_a_summary_lists_each_step_of_its_try_with_what_became_of_it_and_its_tokens_and_cost():
    from airflow.providers.common.ai.durable.core.usage import ModelUsage

    storage = InMemoryStorage()
    first, second = DurableJournal(storage), DurableJournal(storage)
    with first.run() as run:
        model = run.claim("model", "gpt-4.1", "asks 1")
        model.used(ModelUsage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15, cost_usd=0.00006))
        model.record({"answer": "pay"})
        run.claim("tool", "pay", "42").fail("it raised RuntimeError")
    with second.run() as run:
        run.claim("model", "gpt-4.1", "asks 1").handed_out()
        run.claim("tool", "pay", "42").record({"v": "paid"})

    assert steps_of(first) == [
        {"key": "1.1", "kind": "model", "name": "gpt-4.1", "outcome": "live", "tokens": 15, "cost_usd": 0.00006},
        {"key": "1.2", "kind": "tool", "name": "pay", "outcome": "failed", "reason": "it raised RuntimeError"},
    ]
    # A replayed step with what it had cost when it ran: what the replay saved.
    assert steps_of(second) == [
        {"key": "1.1", "kind": "model", "name": "gpt-4.1", "outcome": "replayed", "tokens": 15, "cost_usd": 0.00006},
        {"key": "1.2", "kind": "tool", "name": "pay", "outcome": "live"},
    ]
    summary = try_summary(second.stats, try_number=2, outcome="success", now=NOW, days=1, steps=steps_of(second))
    [read] = read_summaries({2: json.dumps(summary)}, now=NOW)
    assert [(s["key"], s["outcome"], s["tokens"], s["cost_usd"]) for s in read["steps"]] == [
        ("1.1", "replayed", 15, 0.00006),
        ("1.2", "live", None, None),
    ]
    assert read["unreadable"] == []


def test_steps_are_listed_as_they_ran_nested_ones_under_their_step_each_outcome_named_and_names_masked():
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret(SECRET)
    journal = DurableJournal(InMemoryStorage())
    with journal.run() as run:
        ask = run.claim("tool", "ask_expert", "q")
        with ask.running(), journal.run() as nested:
            nested.claim("model", "expert", "q").record({"answer": "yes"})
        ask.record({"answer": "yes"})
        run.claim("tool", "odd", "x").not_recordable("its result is not JSON")
        run.claim("tool", f"tool-{SECRET}", "y").record({"v": 1})
        run.claim("approval", "refund", "z")  # no answer yet
    assert [(s["key"], s["name"], s["outcome"]) for s in steps_of(journal)] == [
        ("1.1", "ask_expert", "live"),
        ("1.1.1.1", "expert", "live"),
        ("1.2", "odd", "not_recorded"),
        ("1.3", "tool-***", "live"),
        ("1.4", "refund", "unfinished"),
    ]


def test_a_try_of_more_steps_than_a_summary_lists_keeps_the_first_and_says_how_many_more():
    steps = [{"key": f"1.{n}", "kind": "tool", "name": "t", "outcome": "live"} for n in range(1, 251)]
    summary = try_summary(JournalStats(), try_number=1, outcome="success", now=NOW, days=1, steps=steps)
    assert (len(summary["steps"]), summary["steps"][-1]["key"], summary["steps_not_listed"]) == (200, "1.200", 50)
    [read] = read_summaries({1: json.dumps(summary)}, now=NOW)
    assert (len(read["steps"]), read["steps_not_listed"], read["unreadable"]) == (200, 50, [])


def test_a_summary_written_before_steps_were_listed_reads_with_none_and_nothing_unreadable():
    stored = try_summary(JournalStats(), try_number=1, outcome="failed", now=NOW, days=1)
    del stored["steps"]
    [read] = read_summaries({1: json.dumps(stored)}, now=NOW)
    assert (read["steps"], read["steps_not_listed"], read["unreadable"]) == (None, None, [])


def test_a_model_of_unknown_price_reads_as_none_not_as_unreadable():
    stored = {
        "usage": {"models": {"house-model": {"total_tokens": 30, "cost_usd": None}}, "unknown_prices": ["house-model"]}
    }
    [read] = read_summaries({1: json.dumps(stored)}, now=NOW)
    assert read["usage"]["models"]["house-model"]["cost_usd"] is None
    assert read["unreadable"] == []


def test_a_tool_call_the_try_was_cut_off_during_is_named_as_such_not_as_ran_live_and_its_step_says_why():
    journal = DurableJournal(InMemoryStorage())
    with pytest.raises(KeyboardInterrupt), journal.run() as run:
        run.claim("model", "gpt-4.1", "asks").record({"answer": "refund"})
        with run.claim("tool", "refund", "42").running(mark_in_flight=True):
            raise KeyboardInterrupt

    assert journal.stats.ran_live == {"model": 1}
    line = journal.stats.summary()
    assert line.startswith(
        "Durable: replayed 0, ran live 1 (model 1), cut off during the call (in flight for the next try): "
        "tool 'refund' at 1.2 (KeyboardInterrupt), could not record 0,"
    )
    assert steps_of(journal)[1] == {
        "key": "1.2",
        "kind": "tool",
        "name": "refund",
        "outcome": "unfinished",
        "reason": "the try was cut off during the call (KeyboardInterrupt); it stays in flight",
    }


def test_a_model_request_the_budget_refused_says_why_in_its_step_and_the_reason_reads_back():
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow.providers.common.ai.durable.openai_agents import UsageBudget

    model = ScriptedModel([[function_call("lookup", {}, call_id="c1")], [assistant_message("done")]])

    @function_tool
    def lookup() -> str:
        """Looks up."""
        return "found"

    journal = DurableJournal(InMemoryStorage())
    with journal_scope(journal), pytest.raises(AirflowFailException):
        run_durably_sync(Agent(name="a", model=model, tools=[lookup]), "hi", budget=UsageBudget(max_requests=1))

    model_step, tool_step, refused_step = steps_of(journal)
    assert (model_step["outcome"], tool_step["outcome"]) == ("live", "live")
    assert "reason" not in model_step and "reason" not in tool_step
    assert (refused_step["key"], refused_step["outcome"]) == ("1.3", "unfinished")
    assert "the request to model 'ScriptedModel' at 1.3 was not sent" in refused_step["reason"]
    summary = try_summary(journal.stats, try_number=1, outcome="failed", now=NOW, days=1, steps=steps_of(journal))
    [read] = read_summaries({1: json.dumps(summary)}, now=NOW)
    assert read["steps"][2]["reason"] == refused_step["reason"] and read["unreadable"] == []


def test_an_approval_with_no_answer_yet_says_it_waits_for_a_person():
    journal = DurableJournal(InMemoryStorage())
    with journal.run() as run:
        run.claim("approval", "refund", "z")
    assert steps_of(journal)[0]["reason"] == "waits for a person's answer"


def test_counts_of_one_read_in_the_singular_in_the_summary_line():
    stats = JournalStats()
    stats.tokens_saved, stats.indistinct_runs = 1, 1
    assert "saved 1 token by replaying" in stats.summary()
    assert "1 run ran live that asks the same as another run in flight" in stats.summary()
