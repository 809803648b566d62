"""
Approvals of tool calls in durable runs: a person answers an Airflow human-in-the-loop request.

When a journaled run stops because tool calls need approval, the run asks the approval desk of
its task (:func:`approval_desk`) for a decision. A decision is a step of the run's journal (kind
``"approval"``), claimed at the next position after the model call that asked for the tools, so
that every try numbers the steps alike: a recorded decision replays and is never asked again; an
answer the task was resumed with is recorded there; with neither, the desk notes what to ask and
the run ends with the SDK's interruptions, and :func:`wait_for_answer` creates the request, records
at the step that it was asked, and defers the task to the triggerer until a person answers.

An answer belongs to Airflow's request until a try records it: a try that reaches a step whose
request was asked and never answered in the journal (the try that was to resume with the answer
failed first) asks nothing again, which would erase a given answer, and waits for that request.

This module knows the journal, neither Airflow nor the agent SDK: ``durable/airflow/approvals.py``
asks Airflow and resumes with the answer, ``openai_agents`` turns the SDK's interruptions into
:class:`ApprovalRequest` and applies the decisions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass

from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.in_flight import InFlightDecision, PendingInFlightQuestion
from airflow.providers.common.ai.durable.core.masking import shown_arguments
from airflow.providers.common.ai.durable.core.runs import DurableRun
from airflow.providers.common.ai.durable.core.steps import JournalStep

log = logging.getLogger(__name__)

#: The options of every request: the first approves, the second rejects.
APPROVE, REJECT = "Approve", "Reject"
OPTIONS = [APPROVE, REJECT]
#: The step kind of a decision in the journal (a storage format: a rename is a migration).
APPROVAL_STEP = "approval"
#: What an approval step records once its request is made, until a decision replaces it (a storage format).
ASKED = "asked"


@dataclass(frozen=True)
class ApprovalRequest:
    """One tool call a run stopped for: the agent that asked, the tool, its arguments (JSON text), its call id."""

    agent: str
    tool: str
    arguments: str
    call_id: str


@dataclass(frozen=True)
class Decision:
    """A person's answer (``by`` names them), or the default a timeout took (``timed_out``)."""

    approved: bool
    by: str | None = None
    timed_out: bool = False

    def describe(self) -> str:
        verdict = "approved" if self.approved else "rejected"
        if self.timed_out:
            return f"{verdict} by the default after the response timeout"
        return f"{verdict} by {self.by or 'an unnamed user'}"


@dataclass(frozen=True)
class Answer:
    """
    The decision the task was resumed with, for the approval step it was asked for; with no step,
    for the request made last (``dag.test()`` resumes a task without the kwargs it deferred with).
    """

    step_key: str | None
    fingerprint: str | None
    #: An approval's decision, or a decision about a call found in flight (R-56).
    decision: Decision | InFlightDecision


@dataclass(frozen=True)
class PendingApproval:
    """What a try must ask a person before its run can go on."""

    step_key: str
    fingerprint: str
    requests: tuple[ApprovalRequest, ...]
    #: An earlier try made this request: its answer, if one was given, is Airflow's to hand back.
    asked: bool = False

    options = OPTIONS

    @property
    def subject(self) -> str:
        agents = ", ".join(dict.fromkeys(repr(request.agent) for request in self.requests))
        tools = ", ".join(dict.fromkeys(request.tool for request in self.requests))
        return f"Agent {agents} asks to run {tools}"

    @property
    def body(self) -> str:
        """Each call's tool and its arguments, masked as the task log masks them, as Markdown."""
        return "\n\n".join(
            f"**{request.tool}** (call `{request.call_id}`)\n\n{shown_arguments(request.arguments)}"
            for request in self.requests
        )

    def resume_kwargs(self) -> dict[str, str]:
        """What the resumed method gets back, to tell which approval the answer is for."""
        return {"step_key": self.step_key, "fingerprint": self.fingerprint}


class AwaitingAnswer(Exception):
    """A run stopped for a question to a person (the desk's :attr:`~ApprovalDesk.pending`) before it could go on."""


class ApprovalDesk:
    """
    The decisions of one try's runs: recorded ones replay, the ``answer`` the try was resumed with
    is recorded once, and the first approval with neither becomes :attr:`pending`. It also takes
    the decisions about calls found in flight whose tool's policy is ``ask`` (R-56).
    """

    def __init__(self, answer: Answer | None = None, before_going_on: Callable[[], None] | None = None) -> None:
        self.answer = answer
        #: Called once the answer the try resumed with is in the journal, before the run acts on it.
        self._before_going_on = before_going_on
        #: An earlier request of this task instance was answered: Airflow shows its text for the next.
        self.asked_before = answer is not None
        #: What this try must ask, once a run stopped for an approval or a call in flight it has no decision for.
        self.pending: PendingApproval | PendingInFlightQuestion | None = None
        self._pending_step: JournalStep | None = None
        #: The decisions this try applied, for the log: each with the tools it was for.
        self.decided: list[tuple[tuple[str, ...], Decision, bool]] = []

    def decide(self, run: DurableRun, requests: Sequence[ApprovalRequest]) -> list[Decision] | None:
        """
        The decision on each of ``requests`` (the calls one stop of ``run`` waits for), or ``None``
        when no person has answered yet: then :attr:`pending` says what to ask.
        """
        requests = tuple(requests)
        step = run.claim(
            APPROVAL_STEP,
            ", ".join(dict.fromkeys(request.tool for request in requests)),
            fingerprint([asdict(request) for request in requests], what="the calls to approve"),
            counted_when_handed_out=True,
        )
        asked = step.replayed and step.result == ASKED
        decision = _recorded_decision(step) if step.replayed and not asked else None
        replayed = decision is not None
        if replayed:
            step.handed_out()
        self.asked_before = self.asked_before or replayed
        if decision is None:
            answer = self._answer_for(step, asked=asked)
            decision = answer if isinstance(answer, Decision) else None
            if decision is None:
                if self.pending is None and step.fingerprint is not None:
                    self.pending = PendingApproval(step.key, step.fingerprint, requests, asked=asked)
                    self._pending_step = step
                return None
            step.record(asdict(decision))
            # In the store before anything acts on it: a try that ends now leaves it to the next.
            step.run.journal.settle()
            self._go_on()
        tools = tuple(request.tool for request in requests)
        self.decided.append((tools, decision, replayed))
        log.info(
            "Durable: %s step=%s tools=%s",
            "approval replayed" if replayed else "approval given",
            step.describe(),
            ", ".join(tools),
        )
        log.info("Durable: %s %s", ", ".join(tools), decision.describe())
        step.run.journal.stats.approvals.append(f"{', '.join(tools)} {decision.describe()}")
        return [decision] * len(requests)

    def decide_in_flight(self, step: JournalStep, question: PendingInFlightQuestion) -> InFlightDecision | None:
        """
        The decision about the call in flight at ``step`` the try was resumed with, or ``None``:
        then :attr:`pending` asks ``question``. A decision is recorded by the call's resolution.
        """
        answer = self._answer_for(step, asked=question.asked)
        if isinstance(answer, InFlightDecision):
            self._go_on()
            return answer
        if self.pending is None:
            self.pending, self._pending_step = question, step
        return None

    def record_asked(self) -> None:
        """Record at the pending step that its request was made, before the task waits for the answer."""
        step = self._pending_step
        if step is None:
            raise ValueError("record_asked needs a desk with a pending approval")
        if isinstance(self.pending, PendingInFlightQuestion):
            step.mark_in_flight(asked=True)
        else:
            step.record(ASKED)
        step.run.journal.settle()

    def _go_on(self) -> None:
        going_on, self._before_going_on = self._before_going_on, None
        if going_on is not None:
            going_on()

    def _answer_for(self, step: JournalStep, *, asked: bool) -> Decision | InFlightDecision | None:
        answer, self.answer = self.answer, None
        if answer is None:
            return None
        if answer.step_key is None and asked:
            return answer.decision
        if (answer.step_key, answer.fingerprint) != (step.key, step.fingerprint):
            log.warning(
                "Durable: the answer the task resumed with was given for other tool calls; they are asked again "
                "step=%s answered=%s",
                step.describe(),
                answer.step_key,
            )
            return None
        return answer.decision


def _recorded_decision(step: JournalStep) -> Decision | None:
    recorded = step.result if isinstance(step.result, dict) else {}
    approved, by, timed_out = recorded.get("approved"), recorded.get("by"), recorded.get("timed_out", False)
    if not isinstance(approved, bool) or not isinstance(timed_out, bool) or not isinstance(by, (str, type(None))):
        step.refuse_replay("the recorded decision cannot be read")
        return None
    return Decision(approved=approved, by=by, timed_out=timed_out)


_desk: ContextVar[ApprovalDesk | None] = ContextVar("durable_approval_desk", default=None)


@contextlib.contextmanager
def answering_approvals(
    answer: Answer | None = None, before_going_on: Callable[[], None] | None = None
) -> Iterator[ApprovalDesk]:
    """
    Inside this block, a durable run that stops for approvals goes on with the recorded decision
    or ``answer``, else ends with the SDK's interruptions and the desk's ``pending`` approval.
    ``before_going_on`` is called once ``answer`` is recorded, before the run acts on it.
    Only an operator can give up its worker to wait for a person: a plain ``@task`` has no desk.
    """
    desk = ApprovalDesk(answer, before_going_on)
    token = _desk.set(desk)
    try:
        yield desk
    finally:
        _desk.reset(token)


def approval_desk() -> ApprovalDesk | None:
    """The approval desk of the running operator, if it answers approvals."""
    return _desk.get()
