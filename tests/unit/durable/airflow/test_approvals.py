"""
Approvals in durable runs (R-39..R-41, R-54), at the journal: each try builds its agent, tools
and scripted model anew, as a new worker does, and runs inside an approval desk as the operator
does, recording that it asked before it waits. A try that resumes after a person answered replays
every call before the approval, then runs the approved tool once and goes on live; a recorded
decision is never asked again, and a request made is never made again before its answer is taken.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

if not AIRFLOW_V_3_2_PLUS:
    pytest.skip("approvals need Airflow's human-in-the-loop (3.2+)", allow_module_level=True)

import tries
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool import DEFAULT_APPROVAL_REJECTION_MESSAGE
from tries import WorkerDied

from airflow.providers.common.ai.durable.airflow.approval_trigger import ApprovalTrigger
from airflow.providers.common.ai.durable.airflow.approvals import (
    RESUME_DELAY,
    ApprovalFailed,
    ApprovalTimedOut,
    answer_of,
    check_defaults,
    resumed_with,
)
from airflow.providers.common.ai.durable.core.approvals import (
    APPROVAL_STEP,
    ASKED,
    Answer,
    ApprovalDesk,
    ApprovalRequest,
    Decision,
    PendingApproval,
    answering_approvals,
)
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

PAY = function_call("wire_money", {"amount": 5}, call_id="w1")
PAY_AGAIN = function_call("wire_money", {"amount": 7}, call_id="w2")
REPORT = function_call("report", {}, call_id="r1")
DONE = assistant_message("done")


class Payer:
    """An agent that wires money (approval needed) and reports; counts the real runs of each tool."""

    def __init__(self, runs: Counter[str], answers: list[list[Any]], *, report_dies: bool = False) -> None:
        @function_tool(needs_approval=True)
        def wire_money(amount: int) -> str:
            """Wires money."""
            runs[f"wire_money {amount}"] += 1
            return f"wired {amount}"

        @function_tool
        def report() -> str:
            """Reports."""
            runs["report"] += 1
            if report_dies:
                raise WorkerDied
            return "reported"

        self.model = ScriptedModel(answers)
        self.agent = Agent(name="payer", model=self.model, tools=[wire_money, report])


class ApprovalTask(tries.Task):
    """A task whose tries run as AgentOperator runs them: inside an approval desk, maybe with an answer."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: PendingApproval | None = None
        #: Whether the try's desk knew of an earlier request of the task instance (Airflow shows its text).
        self.asked_before = False
        self.desk: ApprovalDesk | None = None

    def resume(
        self, payer: Payer, decision: Decision | None = None, *, waits: bool = True, before_going_on: Any = None
    ) -> Any:
        """
        One try: resumed with ``decision`` for what the try before asked, or a plain retry without
        one. A try that stops for an approval records that it asked, as the operator does once it
        created the request, unless ``waits`` is false (then the test waits with ``self.desk``).
        """
        answer = None
        if decision is not None:
            assert self.pending is not None
            answer = Answer(self.pending.step_key, self.pending.fingerprint, decision)
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal), answering_approvals(answer, before_going_on) as desk:
            try:
                return run_durably_sync(payer.agent, self.prompt)
            finally:
                self.desk, self.pending, self.asked_before = desk, desk.pending, desk.asked_before
                if waits and desk.pending is not None and not desk.pending.asked:
                    desk.record_asked()

    def entries(self) -> dict[str, dict[str, Any]]:
        return {key: json.loads(text) for key, text in self.storage.entries.items()}


def requests_to(model: ScriptedModel) -> list[list[str]]:
    """What each request that reached the model carried as tool outputs, to see what it was asked."""
    return [
        [item["output"] for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"]
        for call in model.calls
    ]


APPROVED = Decision(approved=True, by="alice")
REJECTED = Decision(approved=False, by="bob")


def test_a_run_that_stops_for_an_approval_leaves_what_to_ask_and_runs_no_tool():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    payer = Payer(runs, [[PAY]])

    result = task.resume(payer)

    assert [item.raw_item.call_id for item in result.interruptions] == ["w1"]
    assert task.pending is not None
    assert task.pending.requests == (ApprovalRequest("payer", "wire_money", '{"amount":5}', "w1"),)
    assert task.pending.subject == "Agent 'payer' asks to run wire_money"
    assert '"amount": 5' in task.pending.body
    assert len(payer.model.calls) == 1
    assert runs == {}


def test_an_approved_call_runs_once_and_the_calls_before_it_replay():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))

    resumed = Payer(runs, [[DONE]])
    result = task.resume(resumed, APPROVED)

    assert result.final_output == "done"
    assert task.pending is None
    # The payment's answer replays; the only request is the one after the tool ran.
    assert requests_to(resumed.model) == [["wired 5"]]
    assert runs == {"wire_money 5": 1}
    assert task.replayed == {"model": 1}
    assert task.ran_live == {"model": 1, "tool": 1, APPROVAL_STEP: 1}


def test_a_rejected_call_never_runs_and_the_model_hears_the_sdks_rejection():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))

    resumed = Payer(runs, [[assistant_message("not paid")]])
    result = task.resume(resumed, REJECTED)

    assert result.final_output == "not paid"
    assert requests_to(resumed.model) == [[DEFAULT_APPROVAL_REJECTION_MESSAGE]]
    assert runs == {}


def test_a_decision_is_recorded_and_a_retry_after_a_later_failure_replays_it_without_asking():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))
    with pytest.raises(WorkerDied):
        task.resume(Payer(runs, [[REPORT]], report_dies=True), APPROVED)
    assert runs == {"wire_money 5": 1, "report": 1}

    retry = Payer(runs, [[DONE]])
    result = task.resume(retry)  # a plain retry: no answer

    assert result.final_output == "done"
    assert task.pending is None
    # Every call up to the report replays (the decision too); only the report runs again.
    assert requests_to(retry.model) == [["wired 5", "reported"]]
    assert runs == {"wire_money 5": 1, "report": 2}
    assert task.replayed == {"model": 2, "tool": 1, APPROVAL_STEP: 1}
    # The summary line says which approval the run went on with, and who gave it.
    assert task.journal.stats.summary().endswith(
        ", approvals: wire_money approved by alice, "
        "calls found in flight: report at 1.5 (rerun): ran again with the same idempotency key"
    )


def test_the_recorded_decision_is_an_approval_step_after_the_answer_that_asked_for_it():
    task = ApprovalTask()
    task.resume(Payer(Counter(), [[PAY]]))
    task.resume(Payer(Counter(), [[DONE]]), APPROVED)

    entries = task.entries()
    # model at 1, the tool call it asked for at 2, the decision at 3, the next model call at 4.
    assert [entries[key]["kind"] for key in ("1.1", "1.2", "1.3", "1.4")] == ["model", "tool", APPROVAL_STEP, "model"]
    assert entries["1.3"]["name"] == "wire_money"
    assert entries["1.3"]["result"] == {"approved": True, "by": "alice", "timed_out": False}


def test_two_approvals_in_one_run_are_asked_in_turn_and_each_once():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))
    first = task.pending

    second_try = Payer(runs, [[PAY_AGAIN]])
    result = task.resume(second_try, APPROVED)
    assert [item.raw_item.call_id for item in result.interruptions] == ["w2"]
    assert task.pending is not None and task.pending != first
    assert task.pending.requests[0].arguments == '{"amount":7}'

    third_try = Payer(runs, [[DONE]])
    result = task.resume(third_try, REJECTED)

    assert result.final_output == "done"
    assert requests_to(second_try.model) == [["wired 5"]]
    assert len(third_try.model.calls) == 1
    assert runs == {"wire_money 5": 1}
    assert task.replayed == {"model": 2, "tool": 1, APPROVAL_STEP: 1}


def test_a_try_knows_an_earlier_request_was_made_from_its_answer_or_a_replayed_decision():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))
    assert not task.asked_before

    task.resume(Payer(runs, [[PAY_AGAIN]]), APPROVED)
    assert task.asked_before
    task.resume(Payer(runs, []))  # a retry without an answer replays the first decision and stops at the second
    assert task.pending is not None and task.pending.requests[0].call_id == "w2"
    assert task.asked_before


def test_parallel_calls_that_need_approval_are_asked_together_and_one_answer_decides_them():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY, PAY_AGAIN]]))
    assert task.pending is not None
    assert [request.call_id for request in task.pending.requests] == ["w1", "w2"]
    assert task.pending.subject == "Agent 'payer' asks to run wire_money"

    resumed = Payer(runs, [[DONE]])
    task.resume(resumed, APPROVED)

    assert requests_to(resumed.model) == [["wired 5", "wired 7"]]
    assert runs == {"wire_money 5": 1, "wire_money 7": 1}


def test_an_answer_given_for_other_calls_is_not_applied_and_they_are_asked_again(caplog):
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))
    assert task.pending is not None
    task.pending = PendingApproval(task.pending.step_key, "another fingerprint", task.pending.requests)

    result = task.resume(Payer(runs, []), APPROVED)

    assert [item.raw_item.call_id for item in result.interruptions] == ["w1"]
    assert task.pending is not None and task.pending.fingerprint != "another fingerprint"
    assert "the answer the task resumed with was given for other tool calls" in caplog.text
    assert runs == {}


def test_a_recorded_decision_that_cannot_be_read_is_asked_again():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]))
    task.resume(Payer(runs, [[DONE]]), APPROVED)
    entry = json.loads(task.storage.read("1.3"))
    task.storage.write("1.3", json.dumps({**entry, "result": {"approved": "yes"}}))

    result = task.resume(Payer(runs, [[PAY]]))

    assert [item.raw_item.call_id for item in result.interruptions] == ["w1"]
    assert task.pending is not None
    assert runs == {"wire_money 5": 1}


def test_without_a_desk_run_durably_returns_the_sdks_interruptions_and_records_no_decision():
    runs: Counter[str] = Counter()
    task = tries.Task()
    payer = Payer(runs, [[PAY]])

    result = task.attempt(payer.agent)

    assert [item.raw_item.call_id for item in result.interruptions] == ["w1"]
    assert APPROVAL_STEP not in {json.loads(text)["kind"] for text in task.storage.entries.values()}
    assert runs == {}


@pytest.mark.parametrize(
    "arguments",
    [
        '{"note": "```\\nclose the fence"}',
        '{"name": "Zoë \\u202e\\ud83d\\ude00"}',
        "not JSON at all",
        json.dumps({"blob": "x" * 100_000}),
    ],
)
def test_the_body_shows_odd_arguments_inside_one_fence(arguments):
    pending = PendingApproval("1.3", "f", (ApprovalRequest("a", "t", arguments, "c1"),))

    body = pending.body

    fence = body.split("\n")[2]
    assert set(fence) == {"`"}
    assert body.count(fence) == 2
    assert len(body) < 5000


def test_the_body_masks_secrets_the_task_log_masks():
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret("sk-live-ABCDEFGHIJKLMNOP")
    pending = PendingApproval("1.3", "f", (ApprovalRequest("a", "t", '{"key": "sk-live-ABCDEFGHIJKLMNOP"}', "c"),))

    assert "sk-live-ABCDEFGHIJKLMNOP" not in pending.body
    assert "***" in pending.body


def test_an_event_becomes_the_answer_with_who_gave_it():
    event = {"chosen_options": ["Approve"], "responded_by_user": {"id": "7", "name": "alice"}, "timedout": False}
    assert answer_of(event, "1.3", "f") == Answer("1.3", "f", Decision(approved=True, by="alice"))

    timed_out = {"chosen_options": ["Reject"], "responded_by_user": None, "timedout": True}
    assert answer_of(timed_out, "1.3", "f").decision == Decision(approved=False, timed_out=True)


def test_a_timeout_without_a_default_and_an_odd_answer_fail_naming_why():
    with pytest.raises(ApprovalTimedOut, match="response_timeout"):
        answer_of({"error": "The response timeout has passed", "error_type": "timeout"}, "1.3", "f")
    with pytest.raises(ApprovalFailed, match="answered with"):
        answer_of({"chosen_options": ["Approve", "Reject"]}, "1.3", "f")


@pytest.mark.parametrize("defaults", ["Maybe", ["Approve", "Reject"], [], 1])
def test_defaults_other_than_approve_or_reject_are_refused(defaults):
    with pytest.raises(ValueError, match="defaults must be 'Approve' or 'Reject'"):
        check_defaults(defaults, "pay")


def test_defaults_are_one_option():
    assert check_defaults("Reject", "pay") == ["Reject"]
    assert check_defaults(None, "pay") is None


class Deferred(BaseException):
    def __init__(self, trigger: ApprovalTrigger, kwargs: dict) -> None:
        self.trigger = trigger
        self.kwargs = kwargs


class Operator:
    """Defers as an operator does: the task waits on the trigger."""

    task_id = "pay"

    def defer(self, *, trigger: ApprovalTrigger, method_name: str, kwargs: dict) -> None:
        assert method_name == "execute_complete"
        raise Deferred(trigger, kwargs)


class Ti:
    dag_id, run_id, task_id, map_index, try_number = "payments", "manual", "pay", -1, 1

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}
        self.id = "ti-1"

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[key] = value


@pytest.fixture
def requests_made(monkeypatch) -> list[dict[str, Any]]:
    """The human-in-the-loop requests the task creates (upserts), in order."""
    import airflow.sdk.execution_time.hitl as hitl

    made: list[dict[str, Any]] = []
    monkeypatch.setattr(hitl, "upsert_hitl_detail", lambda **request: made.append(request))
    return made


def wait(task: ApprovalTask, ti: Ti, *, response_timeout: Any = None) -> Deferred:
    """What the operator does when the try stopped for an approval; returns how the task deferred."""
    from airflow.providers.common.ai.durable.airflow.approvals import wait_for_answer

    assert task.desk is not None
    with pytest.raises(Deferred) as deferred:
        wait_for_answer(
            Operator(),
            {"ti": ti, "task_instance": ti},
            task.desk,
            method_name="execute_complete",
            assigned_users=None,
            response_timeout=response_timeout,
            defaults=["Reject"],
            notifiers=[],
        )
    return deferred.value


def test_a_later_request_of_a_task_instance_is_pushed_to_xcom_and_logged_as_airflow_shows_the_first(
    requests_made, caplog
):
    task = ApprovalTask()
    task.resume(Payer(Counter(), [[PAY]]))
    task.resume(Payer(Counter(), [[PAY_AGAIN]]), APPROVED, waits=False)
    ti = Ti()

    deferred = wait(task, ti)

    assert deferred.kwargs == {
        "step_key": "1.6",
        "fingerprint": task.pending.fingerprint,
        "not_before": deferred.trigger.not_before,
    }
    [request] = requests_made
    assert (request["subject"], request["options"]) == ("Agent 'payer' asks to run wire_money", ["Approve", "Reject"])
    assert '"amount": 7' in request["body"]
    assert ti.xcom["approval_request"] == {"subject": request["subject"], "body": request["body"], "step": "1.6"}
    assert "Airflow shows this task instance's first approval request for every later one" in caplog.text


def test_the_task_records_that_it_asked_and_defers_to_the_trigger_that_waits_before_it_looks(requests_made):
    from airflow.sdk.timezone import utcnow

    task = ApprovalTask()
    task.resume(Payer(Counter(), [[PAY]]), waits=False)
    before = utcnow()

    deferred = wait(task, Ti(), response_timeout=timedelta(hours=1))

    assert task.entries()["1.3"]["result"] == ASKED
    trigger = deferred.trigger
    assert isinstance(trigger, ApprovalTrigger)
    assert (trigger.ti_id, trigger.options, trigger.defaults) == ("ti-1", ["Approve", "Reject"], ["Reject"])
    assert before + RESUME_DELAY <= trigger.not_before <= utcnow() + RESUME_DELAY
    assert trigger.not_before < trigger.timeout_datetime
    # The triggerer builds it again from what it serializes to.
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow.providers.common.ai.durable.airflow.approval_trigger.ApprovalTrigger"
    assert ApprovalTrigger(**kwargs).serialize() == (classpath, kwargs)


@pytest.mark.parametrize(
    "stored_classpath",
    [
        "airflow.providers.common.ai.durable.airflow.approval_trigger.ApprovalTrigger",
        # Where the trigger was stored before it serialized its own path: the one alias kept.
        "airflow.providers.common.ai.durable.approval_trigger.ApprovalTrigger",
    ],
)
def test_a_stored_trigger_row_resumes_as_the_triggerer_loads_it_under_its_path_and_under_the_old_one(
    stored_classpath, requests_made
):
    from types import SimpleNamespace

    from airflow.jobs.triggerer_job_runner import TriggerRunner
    from airflow.models.trigger import Trigger

    task = ApprovalTask()
    task.resume(Payer(Counter(), [[PAY]]), waits=False)
    trigger = wait(task, Ti(), response_timeout=timedelta(hours=1)).trigger
    _, kwargs = trigger.serialize()
    # The row as the scheduler stores it (kwargs encrypted), read back as the triggerer reads it.
    row = Trigger(classpath=stored_classpath, kwargs=kwargs)

    # The triggerer's own look-up of a row's class, and its call of the class with the row's kwargs.
    trigger_class = TriggerRunner.get_trigger_by_classpath(SimpleNamespace(trigger_cache={}), row.classpath)
    loaded = trigger_class(**row.kwargs)

    assert type(loaded) is ApprovalTrigger
    assert (loaded.ti_id, loaded.not_before, loaded.timeout_datetime) == (
        trigger.ti_id,
        trigger.not_before,
        trigger.timeout_datetime,
    )
    # Deferred again, it is stored under its real path.
    assert Trigger.from_object(loaded).classpath == trigger.serialize()[0]
    assert loaded.serialize() == trigger.serialize()


def test_a_try_that_failed_before_it_took_the_answer_leaves_the_next_to_wait_for_it_asking_nothing_again(
    requests_made, caplog
):
    caplog.set_level(logging.INFO)
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]), waits=False)
    asked = wait(task, Ti())
    # Airflow failed the try that was to resume with the answer before it ran: a retry.
    retry = Payer(runs, [])
    result = task.resume(retry, waits=False)

    assert [item.raw_item.call_id for item in result.interruptions] == ["w1"]
    assert task.pending is not None and task.pending.asked
    waited = wait(task, Ti())
    assert len(requests_made) == 1  # a second would erase the answer the person gave the first
    assert (waited.kwargs["step_key"], waited.kwargs["fingerprint"]) == (
        asked.kwargs["step_key"],
        asked.kwargs["fingerprint"],
    )
    assert "waiting for the answer to the request an earlier try made step=1.3" in caplog.text
    assert len(retry.model.calls) == 0 and runs == {}

    # The trigger hands the answer back: the approved call runs once, nothing before it again.
    resumed = Payer(runs, [[DONE]])
    assert task.resume(resumed, APPROVED).final_output == "done"
    assert requests_to(resumed.model) == [["wired 5"]]
    assert runs == {"wire_money 5": 1}
    assert task.entries()["1.3"]["result"] == {"approved": True, "by": "alice", "timed_out": False}
    assert task.replayed == {"model": 1}


def test_a_retry_after_the_decision_was_recorded_neither_asks_nor_waits(requests_made):
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]), waits=False)
    wait(task, Ti())
    with pytest.raises(WorkerDied):
        task.resume(Payer(runs, [[REPORT]], report_dies=True), APPROVED)

    result = task.resume(Payer(runs, [[DONE]]))

    assert result.final_output == "done"
    assert task.pending is None
    assert len(requests_made) == 1
    assert runs == {"wire_money 5": 1, "report": 2}


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"defaults": "Maybe"}, ValueError, "defaults must be 'Approve' or 'Reject'"),
        ({"response_timeout": 3600}, TypeError, "response_timeout must be a datetime.timedelta, not int"),
    ],
)
def test_the_operator_refuses_approval_arguments_it_cannot_use_when_the_dag_is_parsed(arguments, error, message):
    from airflow.providers.common.ai.operators.agent import AgentOperator

    with pytest.raises(error, match=message):
        AgentOperator(task_id="pay", agent=Agent(name="payer"), prompt="Pay.", durable=True, **arguments)


def test_an_agent_that_stops_for_an_approval_without_durable_fails_the_task_naming_the_fix():
    from airflow.providers.common.ai.operators.agent import AgentOperator

    runs: Counter[str] = Counter()
    operator = AgentOperator(task_id="pay", agent=Payer(runs, [[PAY]]).agent, prompt="Pay.")

    with pytest.raises(RuntimeError, match="approvals need durable=True"):
        operator.execute({"ti": Ti()})
    assert runs == {}


def first_event(trigger: ApprovalTrigger) -> Any:
    import asyncio

    async def first() -> Any:
        return await anext(trigger.run())

    return asyncio.run(first())


@pytest.fixture
def answer_looked_up(monkeypatch) -> list[Any]:
    """When the trigger looked up the request; each look finds Alice's approval, given before the task deferred."""
    import airflow.providers.standard.triggers.hitl as hitl_trigger
    from airflow.sdk.api.datamodels._generated import HITLDetailResponse, HITLUser
    from airflow.sdk.timezone import utcnow

    import airflow.providers.common.ai.durable.airflow.approval_trigger as approval_trigger

    looked: list[Any] = []
    answered = utcnow()

    def look_up(ti_id: str) -> HITLDetailResponse:
        looked.append(utcnow())
        return HITLDetailResponse(
            response_received=True,
            responded_by_user=HITLUser(id="7", name="alice"),
            responded_at=answered,
            chosen_options=["Approve"],
            params_input={},
        )

    monkeypatch.setattr(hitl_trigger, "get_hitl_detail_content_detail", look_up)
    monkeypatch.setattr(approval_trigger, "get_hitl_detail_content_detail", look_up)
    return looked


def test_the_trigger_hands_an_answer_back_only_once_its_moment_came(answer_looked_up):
    from airflow.sdk.timezone import utcnow

    not_before = utcnow() + timedelta(seconds=0.3)
    trigger = ApprovalTrigger(
        ti_id="ti-1", options=["Approve", "Reject"], params={}, timeout_datetime=None, not_before=not_before
    )

    event = first_event(trigger)

    # It looks once to see it can read answers here, then not again before its moment.
    assert len(answer_looked_up) == 2 and answer_looked_up[1] >= not_before
    assert answer_of(event.payload, "1.3", "f") == Answer("1.3", "f", APPROVED)


def test_a_try_resumed_soon_after_it_deferred_takes_the_answer_at_once_and_acts_on_it_only_once_the_moment_came():
    from airflow.sdk.timezone import utcnow

    from airflow.providers.common.ai.durable.airflow.approvals import going_on_at

    not_before = utcnow() + timedelta(seconds=0.3)
    event = {"chosen_options": ["Approve"], "responded_by_user": {"id": "7", "name": "alice"}, "timedout": False}

    answer = resumed_with({"ti": Ti()}, event, "1.3", "f", method_name="execute_complete")

    assert answer == Answer("1.3", "f", APPROVED)
    assert utcnow() < not_before
    going_on_at(not_before)()
    assert utcnow() >= not_before
    going_on_at(None)()  # dag.test() resumes without the moment: nothing to wait for


def test_a_resumed_try_records_the_answer_before_it_acts_and_a_try_after_it_takes_it_asking_no_one(requests_made):
    """
    Airflow 3.3 may fail a try it resumed the moment a person answered (its defer race): the try
    recorded the answer before it waited to act on it, so the next try (a retry, or a clear)
    replays the decision at once: no new request, no deferral, and the approved call runs once.
    """
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]), waits=False)
    wait(task, Ti())
    seen_before_going_on: list[Any] = []

    def scheduler_fails_the_try() -> None:
        seen_before_going_on.append(task.entries()["1.3"]["result"])
        raise WorkerDied

    doomed = Payer(runs, [])
    with pytest.raises(WorkerDied):
        task.resume(doomed, APPROVED, before_going_on=scheduler_fails_the_try)
    assert seen_before_going_on == [{"approved": True, "by": "alice", "timed_out": False}]
    assert runs == {} and len(doomed.model.calls) == 0

    retry = Payer(runs, [[DONE]])
    result = task.resume(retry, waits=False)

    assert result.final_output == "done"
    assert task.pending is None  # nothing to ask, so the operator neither asks nor defers
    assert len(requests_made) == 1
    assert runs == {"wire_money 5": 1}
    assert requests_to(retry.model) == [["wired 5"]]


def test_a_call_in_flight_answered_by_a_person_is_acted_on_only_after_the_try_may_go_on():
    from airflow.providers.common.ai.durable.core.in_flight import InFlightDecision, PendingInFlightQuestion

    went_on: list[str] = []
    desk = ApprovalDesk(
        Answer("1.3", "f", InFlightDecision("It happened", "done", "alice")), lambda: went_on.append("x")
    )

    class Step:
        key, fingerprint = "1.3", "f"

    question = PendingInFlightQuestion("1.3", "f", "issue_refund", "key-1", "{}", None, asked=True)

    decision = desk.decide_in_flight(Step(), question)  # type: ignore[arg-type]

    assert decision == InFlightDecision("It happened", "done", "alice") and went_on == ["x"]


def test_where_the_trigger_cannot_read_answers_the_task_waits_in_awaiting_input_or_fails_naming_why(monkeypatch):
    from airflow.sdk.timezone import utcnow

    import airflow.providers.common.ai.durable.airflow.approval_trigger as approval_trigger

    # dag.test()'s stand-in supervisor answers the trigger's request with nothing.
    monkeypatch.setattr(approval_trigger, "get_hitl_detail_content_detail", lambda ti_id: None)
    trigger = ApprovalTrigger(
        ti_id="ti-1", options=["Approve", "Reject"], params={}, timeout_datetime=None, not_before=utcnow()
    )
    event = first_event(trigger).payload

    if AIRFLOW_V_3_3_PLUS:
        from airflow.sdk.exceptions import TaskAwaitingInput

        with pytest.raises(TaskAwaitingInput) as waiting:
            resumed_with({"ti": Ti()}, event, "1.3", "f", method_name="execute_complete")
        assert waiting.value.method_name == "execute_complete"
        assert waiting.value.kwargs == {"step_key": "1.3", "fingerprint": "f"}
    else:
        with pytest.raises(ApprovalFailed, match=r"dag.test\(\) of Airflow before 3.3 cannot wait for an approval"):
            resumed_with({"ti": Ti()}, event, "1.3", "f", method_name="execute_complete")


def test_an_answer_that_names_no_step_is_taken_for_the_request_made_last_and_only_for_it():
    # dag.test() resumes a task without the kwargs it deferred with: the answer names no step.
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    task.resume(Payer(runs, [[PAY]]), waits=False)
    unasked = Payer(runs, [])
    task.journal = DurableJournal(task.storage)
    with journal_scope(task.journal), answering_approvals(Answer(None, None, APPROVED)) as desk:
        run_durably_sync(unasked.agent, task.prompt)
    assert desk.pending is not None and runs == {}  # no request was made: the answer is for none

    desk.record_asked()
    resumed = Payer(runs, [[DONE]])
    task.journal = DurableJournal(task.storage)
    with journal_scope(task.journal), answering_approvals(Answer(None, None, APPROVED)):
        result = run_durably_sync(resumed.agent, task.prompt)

    assert result.final_output == "done"
    assert runs == {"wire_money 5": 1}


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """How long each wait of the approvals' Airflow half slept (it does not sleep here)."""
    import airflow.providers.common.ai.durable.airflow.approvals as approvals

    slept: list[float] = []
    monkeypatch.setattr(approvals.time, "sleep", slept.append)
    return slept


def test_a_task_that_made_a_request_holds_its_worker_before_it_defers_where_an_answer_resumes_it_at_once(
    requests_made, sleeps, monkeypatch
):
    """
    Airflow 3.3 resumes a deferred task the moment a person answers, and fails the try if that
    comes before the executor reported the end of the workload that deferred (its defer race): a
    task holds its worker for approval_wait_in_worker after its request appears, so that a quick
    answer lands while it still runs and only the trigger hands it back, approval_resume_delay
    after the deferral. A try that finds the request made by an earlier try does not hold.
    """
    from airflow.sdk.timezone import utcnow

    import airflow.providers.common.ai.durable.airflow.approvals as approvals

    monkeypatch.setattr(approvals, "_resumes_at_an_answer", lambda: True)
    monkeypatch.setenv("AIRFLOW__COMMON_AI__APPROVAL_WAIT_IN_WORKER", "12.5")
    monkeypatch.setenv("AIRFLOW__COMMON_AI__APPROVAL_RESUME_DELAY", "40")
    task = ApprovalTask()
    task.resume(Payer(Counter(), [[PAY]]), waits=False)
    before = utcnow()

    deferred = wait(task, Ti())

    assert len(requests_made) == 1 and task.entries()["1.3"]["result"] == ASKED
    assert sleeps == [12.5]
    assert before + timedelta(seconds=40) <= deferred.trigger.not_before <= utcnow() + timedelta(seconds=40)
    assert deferred.kwargs["not_before"] == deferred.trigger.not_before

    task.resume(Payer(Counter(), []), waits=False)  # a retry: the scheduler failed the try that resumed
    wait(task, Ti())

    assert len(requests_made) == 1 and sleeps == [12.5]


def test_no_worker_is_held_where_only_the_trigger_resumes_the_task_or_the_hold_is_off(
    requests_made, sleeps, monkeypatch
):
    import airflow.providers.common.ai._airflow_private as airflow_private
    import airflow.providers.common.ai.durable.airflow.approvals as approvals

    task = ApprovalTask()
    task.resume(Payer(Counter(), [[PAY]]), waits=False)
    wait(task, Ti())  # outside a worker an executor started: dag.test(), or this test
    assert sleeps == []

    monkeypatch.setattr(airflow_private, "is_run_by_an_executor", lambda: True)
    assert approvals._resumes_at_an_answer() is AIRFLOW_V_3_3_PLUS  # before 3.3 only the trigger resumes it

    monkeypatch.setattr(approvals, "_resumes_at_an_answer", lambda: True)
    monkeypatch.setenv("AIRFLOW__COMMON_AI__APPROVAL_WAIT_IN_WORKER", "0")
    task.resume(Payer(Counter(), [[PAY]]), waits=False)
    task.storage.entries.clear()
    task.resume(Payer(Counter(), [[PAY]]), waits=False)
    wait(task, Ti())
    assert sleeps == []


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf", "86401", "1e400"])
@pytest.mark.parametrize("option", ["approval_wait_in_worker", "approval_resume_delay"])
def test_an_approval_timing_option_that_is_not_a_number_of_seconds_fails_the_task_for_good_naming_it(
    option, value, monkeypatch
):
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow.providers.common.ai.durable.airflow.approvals import approval_timing

    monkeypatch.setenv(f"AIRFLOW__COMMON_AI__{option.upper()}", value)

    with pytest.raises(AirflowFailException, match=rf"\[common.ai\] {option} must be a number of seconds"):
        approval_timing()


def test_the_approval_timing_options_default_to_a_hold_of_20_s_and_a_resume_delay_of_15_s(monkeypatch):
    from airflow.providers.common.ai.durable.airflow.approvals import approval_timing

    assert approval_timing() == (timedelta(seconds=20), timedelta(seconds=15))
    monkeypatch.setenv("AIRFLOW__COMMON_AI__APPROVAL_WAIT_IN_WORKER", " 0 ")
    monkeypatch.setenv("AIRFLOW__COMMON_AI__APPROVAL_RESUME_DELAY", "2.5")
    assert approval_timing() == (timedelta(0), timedelta(seconds=2.5))
