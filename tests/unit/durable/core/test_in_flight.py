"""
A call in flight when a try died (R-56): each policy of its tool, ``rerun``, ``verify``, ``ask`` and
``fail``, on the retry of a task whose worker died inside the call. Each test counts how often the
side effect happened, what reached the model on each try and what the summary says.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from typing import Any

import pytest
from agents import Agent, UserError, function_tool
from agents.testing import ScriptedModel, UnexpectedModelCall, assistant_message, function_call
from airflow.providers.common.compat.sdk import AirflowFailException, mask_secret
from tries import Task, WorkerDied

from airflow.providers.common.ai.durable.core.approvals import Answer, AwaitingAnswer, answering_approvals
from airflow.providers.common.ai.durable.core.in_flight import (
    FAIL_TASK,
    HAPPENED,
    RUN_IT,
    Happened,
    InFlightDecision,
    PendingInFlightQuestion,
)
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import (
    in_flight,
    run_durably,
    run_durably_streamed,
    run_durably_sync,
)
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

REFUND = function_call("refund", {"order": "A-1", "card": "4111 1111 1111 1111"}, call_id="c1")


class Payments:
    """A payment service without idempotency: every call is a refund. ``dies`` kills the worker in it."""

    def __init__(self) -> None:
        self.refunds: list[str] = []
        self.dies: str | None = "after"  # "before" or "after" the refund, or None
        self.verified: list[tuple[str, Any]] = []

    def tool(self, policy: Any = None) -> Any:
        @function_tool
        def refund(order: str, card: str) -> str:
            """Refund an order."""
            if self.dies == "before":
                raise WorkerDied("killed before the refund")
            from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key

            self.refunds.append(current_idempotency_key())
            if self.dies == "after":
                raise WorkerDied("killed after the refund")
            return f"refunded {order} as R-{len(self.refunds)}"

        return policy(refund) if policy is not None else refund

    def find(self, key: str, arguments: Any) -> Happened | None:
        self.verified.append((key, arguments))
        return Happened(f"refund {self.refunds.index(key) + 1} already made") if key in self.refunds else None


def tool_outputs(scripted: ScriptedModel) -> list[list[str]]:
    """What each request that reached the model carried as tool outputs."""
    return [
        [item["output"] for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"]
        for call in scripted.calls
    ]


def agent(scripted: ScriptedModel, *tools: Any) -> Agent:
    return Agent(name="payer", model=scripted, tools=list(tools))


def died_in_the_call(task: Task, payments: Payments, policy: Any = None) -> ScriptedModel:
    """Try 1: the model asks for the refund and the worker dies in the call."""
    first = ScriptedModel([[REFUND]])
    with pytest.raises(WorkerDied):
        task.attempt(agent(first, payments.tool(policy)))
    assert tool_outputs(first) == [[]]
    assert task.entries()["1.2"]["state"] == "in_flight"
    payments.dies = None
    return first


class PaymentTask(Task):
    def entries(self) -> dict[str, dict[str, Any]]:
        return {key: json.loads(text) for key, text in self.storage.entries.items()}

    def asking(self, scripted: ScriptedModel, payments: Payments, policy: Any, answer: Answer | None = None) -> Any:
        """A try as AgentOperator runs it: with a desk that may ask a person, maybe resumed with ``answer``."""
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal), answering_approvals(answer) as desk:
            try:
                return run_durably_sync(agent(scripted, payments.tool(policy)), self.prompt)
            finally:
                self.desk = desk


# rerun


def test_rerun_the_default_runs_the_call_again_with_the_same_key_and_warns(caplog):
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments)

    second = ScriptedModel([[assistant_message("Refunded.")]])
    with caplog.at_level(logging.WARNING):
        task.attempt(agent(second, payments.tool()))
    # At least once: the refund happened twice, under one key the service could have used.
    assert len(payments.refunds) == 2 and payments.refunds[0] == payments.refunds[1]
    assert tool_outputs(second) == [["refunded A-1 as R-2"]]
    assert "never finished runs again step=tool 'refund' at 1.2" in caplog.text
    assert task.journal.stats.summary().endswith(
        "calls found in flight: refund at 1.2 (rerun): ran again with the same idempotency key"
    )


def test_rerun_of_a_tool_marked_safe_to_repeat_warns_nothing(caplog):
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight(safe_to_repeat=True))

    with caplog.at_level(logging.WARNING):
        task.attempt(
            agent(ScriptedModel([[assistant_message("Refunded.")]]), payments.tool(in_flight(safe_to_repeat=True)))
        )
    assert len(payments.refunds) == 2
    assert "never finished" not in caplog.text


# verify


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync verify", "async verify"])
def test_verify_that_finds_the_effect_hands_its_output_to_the_model_and_the_call_never_runs_again(asynchronous):
    task, payments = PaymentTask(), Payments()

    async def found(key: str, arguments: Any) -> Happened | None:
        return payments.find(key, arguments)

    policy = in_flight("verify", verify=found if asynchronous else payments.find)
    died_in_the_call(task, payments, policy)

    second = ScriptedModel([[assistant_message("Refunded.")]])
    task.attempt(agent(second, payments.tool(policy)))
    assert len(payments.refunds) == 1  # exactly once
    assert payments.verified == [(payments.refunds[0], {"order": "A-1", "card": "4111 1111 1111 1111"})]
    assert tool_outputs(second) == [["refund 1 already made"]]
    assert task.ran_live == {"model": 1} and task.replayed == {"model": 1}
    assert task.journal.stats.in_flight == [
        {
            "step": "1.2",
            "tool": "refund",
            "idempotency_key": payments.refunds[0],
            "policy": "verify",
            "outcome": "it happened",
        }
    ]
    entry = task.entries()["1.2"]
    assert (entry["state"], entry["meta"]["in_flight"]) == ("done", "verify: it happened")

    # A later try replays the resolved call and the answer after it: neither verify nor the tool runs.
    third = ScriptedModel([])
    result = task.attempt(agent(third, payments.tool(policy)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 1
    assert task.replayed == {"model": 2, "tool": 1} and not third.calls
    assert result.final_output == "Refunded."


def test_an_output_that_says_it_happened_with_a_secret_in_it_keeps_the_call_in_flight_for_the_next_try():
    # Stored masked, the resolved call would replay "***" or, refused as masked, run live: its mark
    # stays instead, and a later try asks verify again. The refund still happens once.
    receipt = "receipt-k3y-5150"
    mask_secret(receipt)
    task, payments = PaymentTask(), Payments()

    def found(key: str, arguments: Any) -> Happened | None:
        payments.verified.append((key, arguments))
        return Happened(f"already refunded, {receipt}") if key in payments.refunds else None

    policy = in_flight("verify", verify=found)
    died_in_the_call(task, payments, policy)
    mark = task.entries()["1.2"]

    failing = ScriptedModel([])  # the answer after the call cannot be had: the try fails
    with pytest.raises(UnexpectedModelCall):
        task.attempt(agent(failing, payments.tool(policy)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 1
    assert tool_outputs(failing) == [[f"already refunded, {receipt}"]]  # the model got the real output
    assert task.entries()["1.2"] == mark
    assert any("held a secret, so the call stays in flight" in line for line in task.journal.stats.not_recorded)
    assert receipt not in json.dumps(task.entries())

    third = ScriptedModel([[assistant_message("Refunded.")]])
    task.attempt(agent(third, payments.tool(policy)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 2  # asked again, never run again
    assert tool_outputs(third) == [[f"already refunded, {receipt}"]]
    assert task.ran_live == {"model": 1} and task.replayed == {"model": 1}
    assert task.journal.stats.in_flight[0]["outcome"] == "it happened"


def test_verify_that_finds_no_effect_runs_the_call_once():
    task, payments = PaymentTask(), Payments()
    payments.dies = "before"
    first = ScriptedModel([[REFUND]])
    policy = in_flight("verify", verify=payments.find)
    with pytest.raises(WorkerDied):
        task.attempt(agent(first, payments.tool(policy)))
    payments.dies = None

    second = ScriptedModel([[assistant_message("Refunded.")]])
    task.attempt(agent(second, payments.tool(policy)))
    assert len(payments.refunds) == 1
    assert tool_outputs(second) == [["refunded A-1 as R-1"]]
    assert task.journal.stats.in_flight[0]["outcome"] == "it did not happen, ran again"
    assert task.entries()["1.2"]["meta"]["in_flight"] == "verify: it did not happen, ran again"


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(lambda key, arguments: 1 / 0, id="verify raises"),
        pytest.param(lambda key, arguments: "refund 1", id="verify answers neither Happened nor None"),
    ],
)
def test_verify_that_fails_fails_the_try_and_keeps_the_call_in_flight_for_the_next(failure):
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight("verify", verify=payments.find))
    mark = task.entries()["1.2"]

    second = ScriptedModel([[assistant_message("Refunded.")]])
    with pytest.raises(UserError, match="stays in flight"):
        task.attempt(agent(second, payments.tool(in_flight("verify", verify=failure))))
    assert len(payments.refunds) == 1 and tool_outputs(second) == []
    assert task.entries()["1.2"] == mark

    third = ScriptedModel([[assistant_message("Refunded.")]])
    task.attempt(agent(third, payments.tool(in_flight("verify", verify=payments.find))))
    assert len(payments.refunds) == 1
    assert tool_outputs(third) == [["refund 1 already made"]]


def test_a_worker_killed_while_verify_runs_leaves_the_call_in_flight():
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight("verify", verify=payments.find))
    mark = task.entries()["1.2"]

    def killed(key: str, arguments: Any) -> None:
        raise WorkerDied("killed while asking the payment service")

    with pytest.raises(WorkerDied):
        task.attempt(agent(ScriptedModel([]), payments.tool(in_flight("verify", verify=killed))))
    assert task.entries()["1.2"] == mark
    task.attempt(
        agent(ScriptedModel([[assistant_message("ok")]]), payments.tool(in_flight("verify", verify=payments.find)))
    )
    assert len(payments.refunds) == 1


class RefusingMarks(InMemoryStorage):
    """A store written from the journal's thread, as a remote one is, that refuses every in-flight mark, slowly."""

    calls_in_background = True

    def write(self, key: str, value: str) -> None:
        if '"state":"in_flight"' in value:
            time.sleep(0.3)
            raise OSError("the store is read-only")
        super().write(key, value)


def test_a_guarded_call_whose_in_flight_mark_the_store_refused_does_not_run():
    task, payments = PaymentTask(RefusingMarks()), Payments()
    payments.dies = None
    scripted = ScriptedModel([[REFUND], [assistant_message("Refunded.")]])
    with pytest.raises(UserError, match="refused the in-flight mark"):
        task.attempt(agent(scripted, payments.tool(in_flight("verify", verify=payments.find))))
    assert payments.refunds == []


# fail


def test_fail_fails_the_task_for_good_naming_the_call_its_key_and_arguments():
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight("fail"))
    mark = task.entries()["1.2"]

    second = ScriptedModel([[assistant_message("Refunded.")]])
    with pytest.raises(AirflowFailException) as failed:
        task.attempt(agent(second, payments.tool(in_flight("fail"))))
    message = str(failed.value)
    assert "'refund' was in flight at 1.2" in message and payments.refunds[0] in message
    assert '"order":"A-1"' in message.replace(" ", "")
    assert len(payments.refunds) == 1 and not second.calls
    assert task.entries()["1.2"] == mark  # the journal is kept


def test_fail_fails_before_any_tool_of_the_same_answer_starts():
    task, payments = PaymentTask(), Payments()
    runs: Counter[str] = Counter()

    @function_tool
    def notify(order: str) -> str:
        """Tell the customer."""
        runs["notify"] += 1
        return "told"

    both = [REFUND, function_call("notify", {"order": "A-1"}, call_id="c2")]
    with pytest.raises(WorkerDied):
        task.attempt(agent(ScriptedModel([both]), payments.tool(in_flight("fail")), notify))
    payments.dies, before = None, runs["notify"]
    with pytest.raises(AirflowFailException):
        task.attempt(agent(ScriptedModel([]), payments.tool(in_flight("fail")), notify))
    assert runs["notify"] == before


# ask


def asked_after_dying(task: PaymentTask, payments: Payments, policy: Any) -> PendingInFlightQuestion:
    """Try 1 dies in the refund; try 2 stops to ask a person about it: the question it asks."""
    died_in_the_call(task, payments, policy)
    with pytest.raises(AwaitingAnswer):
        task.asking(ScriptedModel([]), payments, policy)
    return task.desk.pending


needs_human_in_the_loop = pytest.mark.skipif(
    not AIRFLOW_V_3_2_PLUS, reason="'ask' needs Airflow's human-in-the-loop (3.2+); refused before, as tested below"
)


@pytest.mark.parametrize("where", ["on a function tool", "for one tool of an MCP server"])
def test_ask_is_refused_when_made_on_an_airflow_without_human_in_the_loop(monkeypatch, where):
    from airflow.providers.common.ai import version_compat

    monkeypatch.setattr(version_compat, "AIRFLOW_V_3_2_PLUS", False)
    with pytest.raises(
        ValueError, match=r"the policy 'ask' needs Airflow's human-in-the-loop support, which Airflow 3\.2"
    ):
        in_flight("ask") if where == "on a function tool" else in_flight(
            "verify", verify=print, tools={"a": in_flight("ask")}
        )


@needs_human_in_the_loop
def test_ask_waits_for_a_person_and_each_answer_resolves_the_call():
    task, payments = PaymentTask(), Payments()
    policy = in_flight("ask")
    question = asked_after_dying(task, payments, policy)
    assert isinstance(question, PendingInFlightQuestion) and not question.asked
    assert question.step_key == "1.2" and question.idempotency_key == payments.refunds[0]
    assert question.started is not None and question.started in question.body
    assert payments.refunds[0] in question.body and '"order": "A-1"' in question.body
    task.desk.record_asked()
    assert task.entries()["1.2"]["meta"]["asked"] is True

    # A plain retry before the answer asks nothing new: it waits for the request an earlier try made.
    with pytest.raises(AwaitingAnswer):
        task.asking(ScriptedModel([]), payments, policy)
    assert task.desk.pending.asked

    answer = Answer("1.2", question.fingerprint, InFlightDecision(HAPPENED, "refund R-1 was made", by="alice"))
    resumed = ScriptedModel([[assistant_message("Refunded.")]])
    task.asking(resumed, payments, policy, answer)
    assert len(payments.refunds) == 1
    assert tool_outputs(resumed) == [["refund R-1 was made"]]
    assert task.journal.stats.in_flight[0]["outcome"] == "it happened (asked: alice)"
    assert task.entries()["1.2"]["state"] == "done"


@needs_human_in_the_loop
def test_a_persons_answer_that_it_happened_with_a_secret_in_it_keeps_the_call_in_flight_for_the_next_try():
    code = "voucher-c0de-7788"
    mask_secret(code)
    task, payments = PaymentTask(), Payments()
    policy = in_flight("ask")
    question = asked_after_dying(task, payments, policy)
    task.desk.record_asked()
    mark = task.entries()["1.2"]

    answer = Answer("1.2", question.fingerprint, InFlightDecision(HAPPENED, f"refunded with {code}", by="alice"))
    resumed = ScriptedModel([])  # the answer after the call cannot be had: the try fails
    with pytest.raises(UnexpectedModelCall):
        task.asking(resumed, payments, policy, answer)
    assert len(payments.refunds) == 1
    assert tool_outputs(resumed) == [[f"refunded with {code}"]]
    assert task.entries()["1.2"] == mark and code not in json.dumps(task.entries())

    # The next try asks about the call again (it waits for the person's request); it never runs it.
    with pytest.raises(AwaitingAnswer):
        task.asking(ScriptedModel([]), payments, policy)
    assert len(payments.refunds) == 1 and task.desk.pending.step_key == "1.2"


@needs_human_in_the_loop
def test_ask_answered_run_it_runs_the_call_once_more():
    task, payments = PaymentTask(), Payments()
    policy = in_flight("ask")
    question = asked_after_dying(task, payments, policy)

    resumed = ScriptedModel([[assistant_message("Refunded.")]])
    task.asking(resumed, payments, policy, Answer("1.2", question.fingerprint, InFlightDecision(RUN_IT, by="bob")))
    assert len(payments.refunds) == 2
    assert tool_outputs(resumed) == [["refunded A-1 as R-2"]]
    assert task.entries()["1.2"]["meta"]["in_flight"] == "ask: it did not happen, run it (asked: bob)"


@needs_human_in_the_loop
def test_ask_answered_fail_fails_the_task_and_a_clear_asks_anew():
    task, payments = PaymentTask(), Payments()
    policy = in_flight("ask")
    question = asked_after_dying(task, payments, policy)
    task.desk.record_asked()

    with pytest.raises(AirflowFailException, match="a person chose to fail the task"):
        task.asking(
            ScriptedModel([]), payments, policy, Answer("1.2", question.fingerprint, InFlightDecision(FAIL_TASK))
        )
    assert len(payments.refunds) == 1
    assert "asked" not in task.entries()["1.2"]["meta"]

    with pytest.raises(AwaitingAnswer):
        task.asking(ScriptedModel([]), payments, policy)
    assert not task.desk.pending.asked


@needs_human_in_the_loop
def test_ask_in_a_plain_task_fails_it_saying_only_the_operator_can_ask():
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight("ask"))
    with pytest.raises(AirflowFailException, match=r"only AgentOperator\(durable=True\) can ask"):
        task.attempt(agent(ScriptedModel([]), payments.tool(in_flight("ask"))))
    assert len(payments.refunds) == 1


# Every way a try dies mid-call, and calls inside nested runs


def test_a_call_cancelled_by_another_tools_exception_is_resolved_by_its_policy():
    task, payments = PaymentTask(), Payments()
    payments.dies = None
    started = asyncio.Event()

    @function_tool
    async def slow_refund(order: str) -> str:
        """Refund, slowly."""
        from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key

        payments.refunds.append(current_idempotency_key())
        started.set()
        await asyncio.sleep(30)
        return "refunded"

    audit_down = True

    @function_tool(failure_error_function=None)
    async def audit(order: str) -> str:
        """Audit the order."""
        if not audit_down:
            return "ok"
        await started.wait()
        raise RuntimeError("audit service down")

    policy = in_flight("verify", verify=payments.find)
    both = [
        function_call("slow_refund", {"order": "A-1"}, call_id="c1"),
        function_call("audit", {"order": "A-1"}, call_id="c2"),
    ]
    with pytest.raises(UserError):
        task.attempt(agent(ScriptedModel([both]), policy(slow_refund), audit))
    assert task.entries()["1.2"]["state"] == "in_flight"

    second, audit_down = ScriptedModel([[assistant_message("Done.")]]), False
    task.attempt(agent(second, policy(slow_refund), audit))
    assert len(payments.refunds) == 1
    assert tool_outputs(second) == [["refund 1 already made", "ok"]]


def test_a_call_in_flight_inside_a_nested_run_is_resolved_by_its_own_policy():
    task, payments = PaymentTask(), Payments()
    policy = in_flight("verify", verify=payments.find)
    inner: list[ScriptedModel] = []

    @function_tool
    async def clerk(request: str) -> str:
        """Ask the clerk, an agent of its own, journaled under this call."""
        result = await run_durably(Agent(name="clerk", model=inner[-1], tools=[payments.tool(policy)]), request)
        return str(result.final_output)

    def boss(scripted: ScriptedModel, clerk_model: ScriptedModel) -> Agent:
        inner.append(clerk_model)
        return Agent(name="boss", model=scripted, tools=[clerk])

    ask_clerk = [function_call("clerk", {"request": "refund A-1"}, call_id="b1")]
    with pytest.raises(WorkerDied):
        task.attempt(boss(ScriptedModel([ask_clerk]), ScriptedModel([[REFUND]])))
    payments.dies = None
    assert task.entries()["1.2.1.2"]["state"] == "in_flight"

    outer, clerk_model = (
        ScriptedModel([[assistant_message("All refunded.")]]),
        ScriptedModel([[assistant_message("Done.")]]),
    )
    task.attempt(boss(outer, clerk_model))
    assert len(payments.refunds) == 1
    # The clerk's first answer replays; its refund, in flight, is verified, not run again.
    assert tool_outputs(clerk_model) == [["refund 1 already made"]]
    assert tool_outputs(outer) == [["Done."]]
    assert [(call["step"], call["policy"]) for call in task.journal.stats.in_flight] == [
        ("1.2", "rerun"),
        ("1.2.1.2", "verify"),
    ]


@pytest.mark.parametrize("policy", ["verify", "fail"])
def test_a_streamed_run_resolves_a_call_in_flight_as_a_run_does(policy):
    task, payments = PaymentTask(), Payments()
    chosen = in_flight("fail") if policy == "fail" else in_flight("verify", verify=payments.find)

    def streamed(scripted: ScriptedModel) -> None:
        async def run() -> None:
            task.journal = DurableJournal(task.storage)
            with journal_scope(task.journal):
                result = run_durably_streamed(agent(scripted, payments.tool(chosen)), task.prompt)
                async for _ in result.stream_events():
                    pass

        asyncio.run(run())

    with pytest.raises(WorkerDied):
        streamed(ScriptedModel([[REFUND]]))
    payments.dies = None
    second = ScriptedModel([[assistant_message("Refunded.")]])
    if policy == "fail":
        with pytest.raises(AirflowFailException, match="its tool's policy is 'fail'"):
            streamed(second)
        assert not second.calls
    else:
        streamed(second)
        assert tool_outputs(second) == [["refund 1 already made"]]
    assert len(payments.refunds) == 1


# Policies refused when the DAG is parsed


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: in_flight("twice"), ValueError, "must be one of rerun, verify, ask, fail"),
        (lambda: in_flight("verify"), ValueError, "give verify="),
        (lambda: in_flight("fail", verify=print), ValueError, "give verify="),
        (lambda: in_flight("verify", verify="payments.find"), TypeError, "verify must be a function"),
        (lambda: in_flight("fail", safe_to_repeat=True), ValueError, "safe_to_repeat goes with the policy 'rerun'"),
        (lambda: in_flight("ask", tools={"x": "rerun"}), TypeError, "tools must map tool names"),
        (lambda: in_flight("fail")(print), TypeError, "above @function_tool"),
        (lambda: in_flight("fail", tools={"a": in_flight()})(Payments().tool()), TypeError, "applies to an MCP server"),
    ],
)
def test_a_policy_that_cannot_work_is_refused_when_it_is_made(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_a_fork_that_keeps_a_call_in_flight_keeps_its_mark_and_its_policy_decides_on_the_next_try():
    # Issue 32: a journal file forked at the step in flight; the forked task instance's next try
    # asks the tool's verify function, and the refund is not made again.
    from airflow.providers.common.ai.durable.core.journal_file import (
        check_fork_point,
        export_document,
        journal_file_text,
        read_journal_file,
    )

    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight("verify", verify=payments.find))
    document = export_document(
        task.storage.entries,
        task_instance={"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1},
        source="journal",
        exported_at="2026-12-06T00:00:00+00:00",
    )
    forked_file = read_journal_file(journal_file_text(document), dag_id="d", task_id="t")
    assert [key for key, _ in forked_file.steps] == ["1.1", "1.2"]
    check_fork_point(forked_file, 2)

    fork = PaymentTask(InMemoryStorage())
    fork.storage.entries.update(forked_file.entries(up_to=2))
    assert fork.entries()["1.2"]["state"] == "in_flight"
    second = ScriptedModel([[assistant_message("Refunded.")]])
    fork.attempt(agent(second, payments.tool(in_flight("verify", verify=payments.find))))

    assert len(payments.refunds) == 1  # made by the recorded try only
    assert [key for key, _ in payments.verified] == [payments.refunds[0]]
    assert tool_outputs(second) == [["refund 1 already made"]]
    assert fork.replayed == Counter(model=1)
