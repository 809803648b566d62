"""
The listener that ends each durable try (R-21 to R-23, R-52), called as Airflow calls it, on a
journal bound to a task instance the way a running task binds it: success deletes everything every
try recorded (also when the successful try ran no agent, also after the Fernet key changed), a
failure keeps it, and nothing is deleted when one agent run inside the task returns.
"""

from __future__ import annotations

import datetime
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from airflow.providers.common.ai.durable.airflow import task_instance
from airflow.providers.common.ai.durable.airflow.summary_reading import read_summaries
from airflow.providers.common.ai.durable.airflow.summary_stores import SUMMARY_KEY_PREFIX
from airflow.providers.common.ai.durable.airflow.task_state_store import KEY_PREFIX
from airflow.providers.common.ai.durable.core.segments import records_of
from airflow.providers.common.ai.durable.openai_agents import run_durably, run_durably_sync
from airflow.providers.common.ai.plugins import durable as listener
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS


class TaskStateStore:
    """``context["task_state_store"]`` of one task instance (Airflow 3.3): JSON values shared by all tries."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.reads: list[str] = []
        #: Set once the try reported its end with retries left: Airflow 3.3 then refuses its writes.
        self.refuses: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.append(key)
        return json.loads(self.rows[key]) if key in self.rows else default

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        if self.refuses:
            raise RuntimeError("404 Task instance not found")
        self.rows[key] = json.dumps(value)

    def delete(self, key: str) -> None:
        self.rows.pop(key, None)

    def clear(self) -> None:
        self.rows.clear()


class TaskInstance:
    """
    The tries of one task instance, each bound the way a running task binds its journal
    (``journal_of_running_task``), over the journal storage of this Airflow line or of the other.
    """

    def __init__(self, where: str, monkeypatch: pytest.MonkeyPatch, tmp_path, map_index: int = -1) -> None:
        self.where = where
        self.monkeypatch = monkeypatch
        self.cache_path = tmp_path / "cache"
        self.store = TaskStateStore()
        self.map_index = map_index
        self.try_number = 0
        self.ti: SimpleNamespace | None = None
        if where == "durable_cache_path":
            monkeypatch.setenv("AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH", f"file://{self.cache_path}")

    def start_try(self) -> SimpleNamespace:
        """The next try starts running in this process: its context is the current task context."""
        self.try_number += 1
        context: dict[str, Any] = {}
        self.ti = SimpleNamespace(
            dag_id="triage",
            run_id="manual__1",
            task_id="agent",
            map_index=self.map_index,
            try_number=self.try_number,
            get_template_context=lambda: context,
        )
        context["ti"] = self.ti
        if self.where == "task_state_store":
            context["task_state_store"] = self.store
        self.monkeypatch.setattr(task_instance, "_running_task_context", lambda: context)
        return self.ti

    def resume(self) -> None:
        """The try resumes after it waited (deferred, or awaiting input), in a new worker process."""
        self.monkeypatch.setattr(task_instance, "_journals", {})
        self.monkeypatch.setattr(task_instance, "_summaries", {})

    def stored(self) -> set[str]:
        """The journal's segments stored for this task instance."""
        if self.where == "task_state_store":
            return {key for key in self.store.rows if key.startswith(KEY_PREFIX)}
        folder = f"map_index={self.map_index}"
        return {
            str(path.relative_to(self.cache_path)) for path in self.cache_path.rglob(f"{folder}/*") if path.is_file()
        }

    def journal_keys(self) -> set[str]:
        """The keys of the journal's entries, as the journal names them (``1.2.1.1``), read from its segments."""
        keys = set()
        for stored in self.stored():
            if self.where == "task_state_store":
                segment = json.loads(self.store.rows[stored]).encode("utf-8", "surrogatepass")
            else:
                segment = (self.cache_path / stored).read_bytes()
            keys |= {key for key, _ in records_of(segment)[0]}
        return keys

    def succeeded(self) -> None:
        listener.on_task_instance_success(previous_state="running", task_instance=self.ti)

    def skipped(self) -> None:
        listener.on_task_instance_skipped(previous_state="running", task_instance=self.ti)

    def failed(self) -> None:
        listener.on_task_instance_failed(previous_state="running", task_instance=self.ti, error=RuntimeError())


@pytest.fixture(autouse=True)
def _no_journal_left_open(monkeypatch):
    # Each test's tries bind journals afresh; none leaks into the next test.
    monkeypatch.setattr(task_instance, "_journals", {})
    monkeypatch.setattr(task_instance, "_summaries", {})


@pytest.fixture(params=["task_state_store", "durable_cache_path"])
def task(request, monkeypatch, tmp_path) -> TaskInstance:
    return TaskInstance(request.param, monkeypatch, tmp_path)


class Lookups:
    """A tool that counts its real runs."""

    def __init__(self) -> None:
        self.runs: list[str] = []

        @function_tool
        def lookup(ticket_id: str) -> str:
            """The ticket's text."""
            self.runs.append(ticket_id)
            return "cannot log in"

        self.tool = lookup


def agent(lookups: Lookups, *steps) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(steps))
    return Agent(name="triage", model=model, tools=[lookups.tool]), model


LOOKUP = [function_call("lookup", {"ticket_id": "T-1"}, call_id="c1")]


def test_when_the_task_instance_succeeds_its_journal_is_deleted_with_what_every_try_recorded(task):
    lookups = Lookups()
    task.start_try()
    with pytest.raises(ConnectionError):
        run_durably_sync(agent(lookups, LOOKUP, ConnectionError("outage"))[0], "Triage T-1.")
    task.failed()
    recorded_by_try_1 = task.stored()
    assert recorded_by_try_1

    task.start_try()
    triage, model = agent(lookups, [assistant_message("Login problem.")])
    assert run_durably_sync(triage, "Triage T-1.").final_output == "Login problem."
    assert len(model.calls) == 1  # try 2 replayed what try 1 recorded
    assert task.stored() >= recorded_by_try_1  # kept until Airflow says the task succeeded
    task.succeeded()

    assert task.stored() == set()
    # Cleared later, the task instance starts over: everything runs live.
    task.start_try()
    triage, model = agent(lookups, LOOKUP, [assistant_message("Login problem.")])
    run_durably_sync(triage, "Triage T-1.")
    assert (len(model.calls), lookups.runs) == (2, ["T-1", "T-1"])


def test_a_task_that_skipped_itself_after_its_agent_ran_deletes_its_journal_like_success(task):
    lookups = Lookups()
    task.start_try()
    with pytest.raises(ConnectionError):
        run_durably_sync(agent(lookups, LOOKUP, ConnectionError("outage"))[0], "Triage T-1.")
    task.failed()

    task.start_try()
    run_durably_sync(agent(lookups, [assistant_message("Nothing to do.")])[0], "Triage T-1.")
    assert task.stored()
    task.skipped()  # the task raised AirflowSkipException after the agent answered

    assert task.stored() == set()


def test_a_task_that_failed_for_good_keeps_its_journal_and_a_clear_replays_it(task):
    lookups = Lookups()
    task.start_try()
    with pytest.raises(ConnectionError):
        run_durably_sync(agent(lookups, LOOKUP, ConnectionError("outage"))[0], "Triage T-1.")
    recorded = task.stored()
    task.failed()
    assert task.stored() == recorded != set()

    # A user fixes the cause and clears the task: the next try replays what was recorded.
    task.start_try()
    triage, model = agent(lookups, [assistant_message("Login problem.")])
    assert run_durably_sync(triage, "Triage T-1.").final_output == "Login problem."
    assert (len(model.calls), lookups.runs) == (1, ["T-1"])


def test_the_journal_outlives_an_agent_run_that_returned_until_the_whole_task_succeeds(task):
    lookups = Lookups()

    def two_agents(summarizer: Agent, router: Agent) -> tuple[str, str]:
        summary = run_durably_sync(summarizer, "Summarize T-1.").final_output
        after_the_first_run = task.stored()
        assert after_the_first_run, "the first agent run's journal was deleted when it returned"
        return summary, run_durably_sync(router, summary).final_output

    task.start_try()
    summarizer, summarizer_model = agent(lookups, LOOKUP, [assistant_message("Cannot log in.")])
    router, router_model = agent(lookups, ConnectionError("outage"))
    with pytest.raises(ConnectionError):
        two_agents(summarizer, router)
    task.failed()

    task.start_try()
    summarizer, summarizer_model = agent(lookups)
    router, router_model = agent(lookups, [assistant_message("Route to identity.")])
    assert two_agents(summarizer, router) == ("Cannot log in.", "Route to identity.")
    # The first agent replayed whole; only the second agent's failed request ran again.
    assert (len(summarizer_model.calls), len(router_model.calls), lookups.runs) == (0, 1, ["T-1"])
    task.succeeded()
    assert task.stored() == set()


@pytest.mark.parametrize("where", ["task_state_store", "durable_cache_path"])
def test_the_success_of_one_mapped_task_instance_deletes_only_its_own_journal(where, monkeypatch, tmp_path):
    # Airflow gives each map index its own task state store; the cache path is shared by all.
    lookups = Lookups()
    first, second = (TaskInstance(where, monkeypatch, tmp_path, map_index=i) for i in (0, 1))
    for mapped in (first, second):
        mapped.start_try()
        with pytest.raises(ConnectionError):
            run_durably_sync(agent(lookups, LOOKUP, ConnectionError("outage"))[0], "Triage T-1.")
        mapped.failed()
    recorded_by_the_second = second.stored()
    assert recorded_by_the_second

    first.start_try()
    run_durably_sync(agent(lookups, [assistant_message("Login problem.")])[0], "Triage T-1.")
    first.succeeded()

    assert (first.stored(), second.stored()) == (set(), recorded_by_the_second)
    second.start_try()
    triage, model = agent(lookups, [assistant_message("Login problem.")])
    run_durably_sync(triage, "Triage T-1.")
    assert (len(model.calls), lookups.runs) == (1, ["T-1", "T-1"])  # map index 1 still replays


def test_a_try_that_ran_no_agent_and_failed_keeps_the_journal_of_earlier_tries(task):
    lookups = Lookups()
    task.start_try()
    with pytest.raises(ConnectionError):
        run_durably_sync(agent(lookups, LOOKUP, ConnectionError("outage"))[0], "Triage T-1.")
    task.failed()
    recorded = task.stored()

    task.start_try()  # fails before it reaches its agent
    task.failed()
    assert task.stored() == recorded != set()


def test_a_try_that_ran_no_agent_and_succeeded_deletes_what_earlier_tries_recorded(task):
    lookups = Lookups()
    task.start_try()
    with pytest.raises(ConnectionError):
        run_durably_sync(agent(lookups, LOOKUP, ConnectionError("outage"))[0], "Triage T-1.")
    task.failed()
    assert task.stored()

    task.start_try()  # the ticket was closed meanwhile: this try returns before its agent
    task.succeeded()
    assert task.stored() == set()


def test_a_first_try_that_ran_no_agent_reads_nothing_of_the_store_when_it_succeeds():
    store = TaskStateStore()
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1)
    ti.get_template_context = lambda: {"ti": ti, "task_state_store": store}
    listener.on_task_instance_success(previous_state="running", task_instance=ti)
    assert store.reads == []

    ti.try_number = 2  # a retry or a clear: an earlier try may have left a journal, which is looked for
    listener.on_task_instance_success(previous_state="running", task_instance=ti)
    # Its segments, then the index and first entry an older release would have stored one a key.
    assert store.reads == [f"{KEY_PREFIX}segment-1", f"{KEY_PREFIX}0", f"{KEY_PREFIX}1.1"]


def test_a_try_that_resumed_without_running_its_agent_again_deletes_what_it_recorded_before_it_waited(task):
    class Task:
        """A task whose execution runs an agent and waits; resumed, it finishes without one."""

        def execute(self, context: Any) -> None:
            run_durably_sync(agent(Lookups(), LOOKUP, [assistant_message("Waiting for the customer.")])[0], "T-1")

        def resume_execution(self, next_method: str, next_kwargs: Any, context: Any) -> str:
            return "the customer answered"

    ti = task.start_try()
    ti.task = Task()
    listener.on_task_instance_running(previous_state="queued", task_instance=ti)
    ti.task.execute(context={})
    assert task.stored()

    task.resume()
    ti.task = Task()
    listener.on_task_instance_running(previous_state="queued", task_instance=ti)
    assert ti.task.resume_execution("execute_complete", {}, context={}) == "the customer answered"
    task.succeeded()
    assert task.stored() == set()


class Expert:
    """A tool that asks a billing expert, an agent of its own (a nested run); counts the expert's requests."""

    def __init__(self) -> None:
        self.model = ScriptedModel([[assistant_message("A duplicate authorisation.")]])

        @function_tool
        async def ask_expert(question: str) -> str:
            """Asks the billing expert."""
            return (await run_durably(Agent(name="expert", model=self.model), question)).final_output

        self.tool = ask_expert


ASK = [function_call("ask_expert", {"question": "Charged twice?"}, call_id="c1")]


@pytest.mark.parametrize("try_2_asks_the_expert", [True, False])
def test_after_the_fernet_key_changed_between_tries_success_deletes_the_nested_runs_earlier_tries_recorded(
    task, monkeypatch, try_2_asks_the_expert
):
    from cryptography.fernet import Fernet

    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    task.start_try()
    expert = Expert()
    researcher = Agent(name="researcher", model=ScriptedModel([ASK, ConnectionError("outage")]), tools=[expert.tool])
    with pytest.raises(ConnectionError):
        run_durably_sync(researcher, "Why was ada charged twice?")
    task.failed()
    assert {"0", "1.1", "1.2", "1.2.1.1"} <= task.journal_keys()

    # The key was replaced, not rotated: try 2 reads nothing try 1 wrote, the index included.
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    task.start_try()
    expert = Expert()
    answers = [ASK, [assistant_message("One refund due.")]] if try_2_asks_the_expert else [[assistant_message("?")]]
    model = ScriptedModel(answers)
    run_durably_sync(Agent(name="researcher", model=model, tools=[expert.tool]), "Why was ada charged twice?")
    assert (len(model.calls), len(expert.model.calls)) == (len(answers), int(try_2_asks_the_expert))
    task.succeeded()
    assert task.stored() == set()


def test_an_index_written_after_one_could_not_be_read_keeps_a_later_try_looking_under_every_step(task, monkeypatch):
    from cryptography.fernet import Fernet

    def try_with_the_expert(*answers) -> None:
        expert = Expert()
        researcher = Agent(name="researcher", model=ScriptedModel(list(answers)), tools=[expert.tool])
        run_durably_sync(researcher, "Why was ada charged twice?")

    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    task.start_try()
    with pytest.raises(ConnectionError):
        try_with_the_expert(ASK, ConnectionError("outage"))
    task.failed()
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    task.start_try()  # cannot read try 1's index, writes one of its own for its nested run, fails
    with pytest.raises(ConnectionError):
        try_with_the_expert(ASK, ConnectionError("outage"))
    task.failed()
    assert {"1.2.1.1", "2.2.1.1"} <= task.journal_keys()

    task.start_try()  # reads try 2's index, which cannot name 1.2; replays try 2's run and succeeds
    try_with_the_expert([assistant_message("One refund due.")])
    task.succeeded()
    assert task.stored() == set()


class FailingTask:
    """A task whose execution runs an agent, then raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def execute(self, context: Any) -> None:
        run_durably_sync(agent(Lookups(), LOOKUP, [assistant_message("Login problem.")])[0], "Triage T-1.")
        raise self.error

    def resume_execution(self, next_method: str, next_kwargs: Any, context: Any) -> None:
        raise self.error


def outcomes(store: TaskStateStore) -> list[str]:
    texts = {
        int(key.removeprefix(SUMMARY_KEY_PREFIX)): json.loads(text)
        for key, text in store.rows.items()
        if key.startswith(SUMMARY_KEY_PREFIX)
    }
    return [summary["outcome"] for summary in read_summaries(texts, now=datetime.datetime.now(datetime.timezone.utc))]


def test_a_try_that_fails_keeps_its_summary_as_failed_before_airflow_moves_on_and_warns_of_nothing(
    monkeypatch, tmp_path, caplog
):
    # The summary line is INFO: whatever level an earlier test's logging configuration left behind.
    caplog.set_level(logging.INFO)
    task = TaskInstance("task_state_store", monkeypatch, tmp_path)
    ti = task.start_try()
    ti.task = FailingTask(RuntimeError("the outbox was full"))
    listener.on_task_instance_running(previous_state="queued", task_instance=ti)
    with pytest.raises(RuntimeError, match="the outbox was full"):
        ti.task.execute(context={})
    task.store.refuses = True  # the task runner reported the failure: the next try owns the rows
    task.failed()

    assert outcomes(task.store) == ["failed"]
    assert "Durable: replayed 0, ran live 3 (model 2, tool 1)" in caplog.text
    assert [record.getMessage() for record in caplog.records if record.levelname == "WARNING"] == []


@pytest.mark.parametrize("ending", ["TaskDeferred", "AirflowSkipException", "AirflowRescheduleException"])
def test_a_try_that_waits_or_skips_itself_is_not_kept_as_failed(monkeypatch, tmp_path, ending):
    try:
        from airflow.sdk import exceptions
    except ImportError:  # Airflow 2.11
        from airflow import exceptions

    error = {
        "TaskDeferred": lambda: exceptions.TaskDeferred(trigger=None, method_name="execute_complete"),
        "AirflowSkipException": lambda: exceptions.AirflowSkipException("nothing to do"),
        "AirflowRescheduleException": lambda: exceptions.AirflowRescheduleException(datetime.datetime.now()),
    }[ending]()
    task = TaskInstance("task_state_store", monkeypatch, tmp_path)
    ti = task.start_try()
    ti.task = FailingTask(error)
    listener.on_task_instance_running(previous_state="queued", task_instance=ti)
    with pytest.raises(type(error)):
        ti.task.execute(context={})
    if ending == "AirflowSkipException" and not AIRFLOW_V_3_0_PLUS:
        # Airflow 2.11 tells listeners nothing of a skip: the try ends as it skips, as a success.
        assert outcomes(task.store) == ["success"]
        return
    assert outcomes(task.store) == ["unfinished"]  # kept after the agent's run, as the try goes on


def test_a_summary_that_cannot_be_kept_leaves_the_task_failing_with_its_own_error(monkeypatch, tmp_path):
    task = TaskInstance("task_state_store", monkeypatch, tmp_path)
    ti = task.start_try()
    ti.task = FailingTask(KeyError("the ticket"))
    listener.on_task_instance_running(previous_state="queued", task_instance=ti)
    monkeypatch.setattr(listener, "keep_summary_of_failed_try", lambda ti: 1 / 0)
    with pytest.raises(KeyError, match="the ticket"):
        ti.task.execute(context={})
