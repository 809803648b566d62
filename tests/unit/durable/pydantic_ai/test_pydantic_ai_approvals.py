"""
Approvals in durable Pydantic AI runs (R-39, R-40, R-56 ``ask``, R-65), with Pydantic AI's real
``OpenAIChatModel`` against the local OpenAI-compatible server. Each try builds its agent anew and
runs inside an approval desk as the operator does, recording that it asked before it waits: a call
of a ``requires_approval=True`` tool is answered by a person, as an OpenAI Agents SDK
``needs_approval`` call is, and a call found in flight whose tool's policy is ``ask`` too.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
from collections import Counter
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

if not AIRFLOW_V_3_2_PLUS:
    pytest.skip("approvals need Airflow's human-in-the-loop (3.2+)", allow_module_level=True)

from openai import AsyncOpenAI
from pydantic_ai import Agent, DeferredToolRequests, RunContext, Tool, ToolDenied
from pydantic_ai.exceptions import ApprovalRequired, UserError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from airflow.providers.common.ai.durable.core.approvals import (
    APPROVAL_STEP,
    Answer,
    ApprovalRequest,
    AwaitingAnswer,
    Decision,
    PendingApproval,
    answering_approvals,
)
from airflow.providers.common.ai.durable.core.in_flight import (
    FAIL_TASK,
    HAPPENED,
    RUN_IT,
    InFlightDecision,
    PendingInFlightQuestion,
)
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai import in_flight, run_durably_sync
from airflow.providers.common.ai.testing import FakeOpenAIServer, reply

LOOKUP = ("lookup_order", {"order_id": "O-77"}, "call_lookup")
REFUND = ("issue_refund", {"order_id": "O-77", "amount_eur": 40}, "call_refund")
APPROVED = Decision(approved=True, by="alice")
REJECTED = Decision(approved=False, by="bob")
DENIED = ToolDenied().message


class WorkerDied(BaseException):
    """The try ends here as if its process were killed: nothing in Pydantic AI or the journal catches it."""


def support_agent(server: FakeOpenAIServer, runs: Counter[str], *, close_dies: bool = False) -> Agent[None, str]:
    """An agent that looks up an order, refunds it (a person approves) and closes the ticket."""
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), name="support")

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        runs["lookup_order"] += 1
        return f"{order_id}: charged twice"

    @agent.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, amount_eur: int) -> str:
        """Refund an order."""
        runs["issue_refund"] += 1
        return f"refunded {amount_eur} EUR on {order_id}"

    @agent.tool_plain
    def close_ticket() -> str:
        """Close the ticket."""
        runs["close_ticket"] += 1
        if close_dies:
            raise WorkerDied
        return "closed"

    return agent


class ApprovalTask:
    """A task whose tries run as the operator runs them: inside an approval desk, maybe with an answer."""

    def __init__(self) -> None:
        self.storage = InMemoryStorage()
        self.journal: DurableJournal | None = None
        self.pending: PendingApproval | PendingInFlightQuestion | None = None

    def resume(self, agent: Agent[Any, Any], decision: Decision | InFlightDecision | None = None) -> Any:
        """
        One try: resumed with ``decision`` for what the try before asked, or a plain retry without
        one. A try that stops for a person records that it asked, as the operator does once it
        created the request, and returns ``None``.
        """
        answer = None
        if decision is not None:
            assert self.pending is not None
            answer = Answer(self.pending.step_key, self.pending.fingerprint, decision)
        self.journal = DurableJournal(self.storage)
        with journal_scope(self.journal), answering_approvals(answer) as desk:
            try:
                return run_durably_sync(agent, "Order O-77 was charged twice.").output
            except AwaitingAnswer:
                return None
            finally:
                self.pending = desk.pending
                if desk.pending is not None and not desk.pending.asked:
                    desk.record_asked()

    def kinds(self) -> dict[str, str]:
        return {key: json.loads(text)["kind"] for key, text in sorted(self.storage.entries.items())}


def tool_outputs(body: dict[str, Any]) -> list[str]:
    return [message["content"] for message in body["messages"] if message.get("role") == "tool"]


def test_a_run_that_stops_for_an_approval_leaves_what_to_ask_and_runs_no_refund():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    with FakeOpenAIServer([reply.tool_calls(LOOKUP, REFUND)]) as server:
        assert task.resume(support_agent(server, runs)) is None

    assert isinstance(task.pending, PendingApproval)
    assert task.pending.requests == (
        ApprovalRequest("support", "issue_refund", '{"order_id": "O-77", "amount_eur": 40}', "call_refund"),
    )
    assert task.pending.subject == "Agent 'support' asks to run issue_refund"
    assert '"amount_eur": 40' in task.pending.body
    assert len(server.requests) == 1
    assert runs == {"lookup_order": 1}


def test_an_approved_refund_runs_once_and_the_calls_before_it_replay():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    script = [reply.tool_calls(LOOKUP, REFUND), reply.text("Refunded 40 EUR.")]
    with FakeOpenAIServer(script) as server:
        task.resume(support_agent(server, runs))
        output = task.resume(support_agent(server, runs), APPROVED)

    assert output == "Refunded 40 EUR."
    assert task.pending is None
    # The answer that asked for the refund replays; the only new request is the one after it ran.
    assert len(server.requests) == 2
    assert tool_outputs(server.requests[1].body) == ["O-77: charged twice", "refunded 40 EUR on O-77"]
    assert runs == {"lookup_order": 1, "issue_refund": 1}
    assert task.journal.stats.replayed == {"model": 1, "tool": 1}
    assert task.journal.stats.ran_live == {"model": 1, "tool": 1, APPROVAL_STEP: 1}
    # model, the two calls it asked for, the decision, the next model call
    assert list(task.kinds().values()) == ["model", "tool", "tool", APPROVAL_STEP, "model"]


def test_a_rejected_refund_never_runs_and_the_model_hears_pydantic_ais_denial():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    script = [reply.tool_calls(LOOKUP, REFUND), reply.text("I could not refund it.")]
    with FakeOpenAIServer(script) as server:
        task.resume(support_agent(server, runs))
        output = task.resume(support_agent(server, runs), REJECTED)

    assert output == "I could not refund it."
    assert tool_outputs(server.requests[1].body) == ["O-77: charged twice", DENIED]
    assert runs == {"lookup_order": 1}
    assert task.journal.stats.approvals == ["issue_refund rejected by bob"]


def test_a_decision_is_recorded_and_a_retry_after_a_later_failure_replays_it_without_asking():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    close = ("close_ticket", {}, "call_close")
    script = [reply.tool_calls(LOOKUP, REFUND), reply.tool_calls(close), reply.text("Refunded and closed.")]
    with FakeOpenAIServer(script) as server:
        task.resume(support_agent(server, runs))
        with pytest.raises(WorkerDied):
            task.resume(support_agent(server, runs, close_dies=True), APPROVED)
        assert runs == {"lookup_order": 1, "issue_refund": 1, "close_ticket": 1}

        output = task.resume(support_agent(server, runs))  # a plain retry: no answer

    assert output == "Refunded and closed."
    assert task.pending is None
    # Every call up to the ticket's closing replays, the decision too; only the closing runs again.
    assert len(server.requests) == 3
    assert runs == {"lookup_order": 1, "issue_refund": 1, "close_ticket": 2}
    assert task.journal.stats.replayed == {"model": 2, "tool": 2, APPROVAL_STEP: 1}
    assert task.journal.stats.approvals == ["issue_refund approved by alice"]


def test_two_approvals_in_one_run_are_asked_in_turn_and_each_refund_runs_once():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    second = ("issue_refund", {"order_id": "O-78", "amount_eur": 15}, "call_refund_2")
    script = [reply.tool_calls(LOOKUP, REFUND), reply.tool_calls(second), reply.text("Refunded both.")]
    with FakeOpenAIServer(script) as server:
        task.resume(support_agent(server, runs))
        first = task.pending
        assert task.resume(support_agent(server, runs), APPROVED) is None
        assert isinstance(task.pending, PendingApproval) and task.pending != first
        assert task.pending.requests[0].call_id == "call_refund_2"
        output = task.resume(support_agent(server, runs), REJECTED)

    assert output == "Refunded both."
    assert len(server.requests) == 3
    assert tool_outputs(server.requests[2].body)[-1] == DENIED
    assert runs == {"lookup_order": 1, "issue_refund": 1}
    assert task.journal.stats.approvals == ["issue_refund approved by alice", "issue_refund rejected by bob"]


def test_without_a_desk_the_run_ends_as_pydantic_ai_ends_it_and_records_no_decision():
    runs: Counter[str] = Counter()
    storage = InMemoryStorage()
    with FakeOpenAIServer([reply.tool_calls(LOOKUP, REFUND), reply.tool_calls(REFUND)]) as server:
        with journal_scope(DurableJournal(storage)), pytest.raises(UserError, match="DeferredToolRequests"):
            run_durably_sync(support_agent(server, runs), "Order O-77 was charged twice.")
        agent = support_agent(server, runs)
        with journal_scope(DurableJournal(InMemoryStorage())):
            result = run_durably_sync(agent, "Refund O-77.", output_type=[str, DeferredToolRequests])

    assert [call.tool_call_id for call in result.output.approvals] == ["call_refund"]
    assert APPROVAL_STEP not in {json.loads(text)["kind"] for text in storage.entries.values()}
    assert runs == {"lookup_order": 1}


def refund_agent(server: FakeOpenAIServer, runs: Counter[str], *, dies: bool = False) -> Agent[None, str]:
    """An agent whose refund tool asks a person when a call of it is found in flight."""
    client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), name="support")

    @in_flight("ask")
    @agent.tool_plain
    def issue_refund(order_id: str, amount_eur: int) -> str:
        """Refund an order."""
        runs["issue_refund"] += 1
        if dies:
            raise WorkerDied
        return f"refunded {amount_eur} EUR on {order_id}"

    return agent


def task_died_in_a_refund(server: FakeOpenAIServer, runs: Counter[str]) -> ApprovalTask:
    task = ApprovalTask()
    with pytest.raises(WorkerDied):
        task.resume(refund_agent(server, runs, dies=True))
    # The retry finds the refund in flight and asks a person before any tool of its answer runs.
    assert task.resume(refund_agent(server, runs)) is None
    assert isinstance(task.pending, PendingInFlightQuestion)
    assert task.pending.tool == "issue_refund" and task.pending.step_key == "1.2"
    assert len(server.requests) == 1
    return task


def test_a_call_found_in_flight_whose_policy_is_ask_does_not_run_when_a_person_says_it_happened():
    runs: Counter[str] = Counter()
    with FakeOpenAIServer([reply.tool_calls(REFUND), reply.text("Refunded.")]) as server:
        task = task_died_in_a_refund(server, runs)
        output = task.resume(refund_agent(server, runs), InFlightDecision(HAPPENED, "refund R-1 issued", "alice"))

    assert output == "Refunded."
    assert runs == {"issue_refund": 1}
    assert tool_outputs(server.requests[1].body) == ["refund R-1 issued"]
    assert task.journal.stats.in_flight[0]["outcome"] == "it happened (asked: alice)"


def test_a_call_found_in_flight_whose_policy_is_ask_runs_again_when_a_person_says_it_did_not_happen():
    runs: Counter[str] = Counter()
    with FakeOpenAIServer([reply.tool_calls(REFUND), reply.text("Refunded.")]) as server:
        task = task_died_in_a_refund(server, runs)
        output = task.resume(refund_agent(server, runs), InFlightDecision(RUN_IT, "", "alice"))
        assert output == "Refunded."
        assert runs == {"issue_refund": 2}
        assert tool_outputs(server.requests[1].body) == ["refunded 40 EUR on O-77"]

        server.add(reply.text("unused"))
        # A later retry replays the resolved call: no one is asked, nothing runs.
        assert task.resume(refund_agent(server, runs)) == "Refunded."
    assert task.pending is None
    assert runs == {"issue_refund": 2}
    assert len(server.requests) == 2


def test_a_tool_that_asks_for_an_approval_itself_runs_once_approved_and_a_retry_replays_it():
    runs: Counter[str] = Counter()
    # The final answer of the approved try; a retry would take the next one if anything ran live.
    script = [reply.tool_calls(("pay", {"amount": 50}, "call_pay")), reply.text("Paid."), reply.text("again")]

    def payer(server: FakeOpenAIServer) -> Agent[None, str]:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        agent = Agent(OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client)), name="payer")

        @agent.tool
        def pay(ctx: RunContext[None], amount: int) -> str:
            """Pay an amount; a large one needs a person's approval."""
            if amount > 10 and not ctx.tool_call_approved:
                runs["asked"] += 1
                raise ApprovalRequired(metadata={"reason": "large"})
            runs["paid"] += 1
            return f"paid {amount}"

        return agent

    task = ApprovalTask()
    with FakeOpenAIServer(script) as server:
        assert task.resume(payer(server)) is None
        assert isinstance(task.pending, PendingApproval)
        assert task.pending.requests[0].tool == "pay"
        assert task.resume(payer(server), APPROVED) == "Paid."
        assert runs == {"asked": 1, "paid": 1}  # the resumed try replays the call that asked

        assert task.resume(payer(server)) == "Paid."  # a retry: everything replays

    assert runs == {"asked": 1, "paid": 1}
    assert len(server.requests) == 2
    assert task.journal.stats.replayed == {"model": 2, "tool": 2, APPROVAL_STEP: 1}
    assert list(task.kinds().values()) == ["model", "tool", APPROVAL_STEP, "tool", "model"]
    # What the call that asked records (a storage format: a rename is a migration).
    assert json.loads(task.storage.entries["1.2"])["result"] == {
        "asked_for_approval": True,
        "metadata": {"reason": "large"},
    }


def test_a_call_found_in_flight_whose_policy_is_ask_fails_the_task_for_good_when_a_person_says_so():
    runs: Counter[str] = Counter()
    with FakeOpenAIServer([reply.tool_calls(REFUND), reply.text("Refunded.")]) as server:
        task = task_died_in_a_refund(server, runs)
        with pytest.raises(Exception, match="a person chose to fail the task") as failed:
            task.resume(refund_agent(server, runs), InFlightDecision(FAIL_TASK, "", "alice"))

    assert type(failed.value).__name__ == "AirflowFailException"
    assert runs == {"issue_refund": 1}
    assert len(server.requests) == 1


@pytest.mark.skipif(
    "durable" not in inspect.signature(Tool).parameters,
    reason=f"pydantic-ai-slim {importlib.metadata.version('pydantic-ai-slim')} has no durable=False on tools (2.78+)",
)
def test_an_approved_call_of_a_tool_with_durable_false_runs_on_every_try_and_its_decision_replays():
    runs: Counter[str] = Counter()
    task = ApprovalTask()
    note = ("note_refund", {"order_id": "O-77"}, "call_note")
    close = ("close_ticket", {}, "call_close")
    script = [reply.tool_calls(LOOKUP, REFUND, note), reply.tool_calls(close), reply.text("Refunded and closed.")]

    def agent(*, close_dies: bool = False) -> Agent[None, str]:
        support = support_agent(server, runs, close_dies=close_dies)

        @support.tool_plain(requires_approval=True, durable=False)
        async def note_refund(order_id: str) -> str:
            """Note a refund on the ticket; noting it again does no harm."""
            runs["note_refund"] += 1
            return f"noted {order_id}"

        return support

    with FakeOpenAIServer(script) as server:
        task.resume(agent())
        with pytest.raises(WorkerDied):
            task.resume(agent(close_dies=True), APPROVED)
        assert runs == {"lookup_order": 1, "issue_refund": 1, "note_refund": 1, "close_ticket": 1}

        output = task.resume(agent())  # a plain retry: no answer

    assert output == "Refunded and closed."
    assert task.pending is None
    # The decision on both replays, asking no one; the journaled refund replays, the note runs again.
    assert len(server.requests) == 3
    assert runs == {"lookup_order": 1, "issue_refund": 1, "note_refund": 2, "close_ticket": 2}
    assert task.journal.stats.approvals == ["issue_refund, note_refund approved by alice"]
    assert not [key for key, text in task.storage.entries.items() if "noted O-77" in text]
