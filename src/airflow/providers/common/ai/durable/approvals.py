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

This module knows the journal and Airflow, not the agent SDK: ``openai_agents.py`` turns the
SDK's interruptions into :class:`ApprovalRequest` and applies the decisions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.fingerprint import fingerprint
from airflow.providers.common.ai.durable.journal import DurableRun, JournalStep, masked_text

if TYPE_CHECKING:
    from airflow.sdk.execution_time.hitl import HITLUser

log = logging.getLogger(__name__)

#: The options of every request: the first approves, the second rejects.
APPROVE, REJECT = "Approve", "Reject"
OPTIONS = [APPROVE, REJECT]
#: The step kind of a decision in the journal (a storage format: a rename is a migration).
APPROVAL_STEP = "approval"
#: What an approval step records once its request is made, until a decision replaces it (a storage format).
ASKED = "asked"
#: The least time from deferring for an answer to resuming with it: longer than a busy worker takes
#: to end and be reported to the scheduler (see ``approval_trigger.py``).
RESUME_DELAY = timedelta(seconds=15)
#: The XCom key of the request a task waits for: what Airflow shows of a task instance's later requests is stale.
APPROVAL_REQUEST_XCOM_KEY = "approval_request"
#: The longest arguments text a request's body shows; longer ones are cut, saying so.
MAX_ARGUMENTS_SHOWN = 4000


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
    decision: Decision


@dataclass(frozen=True)
class PendingApproval:
    """What a try must ask a person before its run can go on."""

    step_key: str
    fingerprint: str
    requests: tuple[ApprovalRequest, ...]
    #: An earlier try made this request: its answer, if one was given, is Airflow's to hand back.
    asked: bool = False

    @property
    def subject(self) -> str:
        agents = ", ".join(dict.fromkeys(repr(request.agent) for request in self.requests))
        tools = ", ".join(dict.fromkeys(request.tool for request in self.requests))
        return f"Agent {agents} asks to run {tools}"

    @property
    def body(self) -> str:
        """Each call's tool and its arguments, masked as the task log masks them, as Markdown."""
        parts = []
        for request in self.requests:
            arguments = masked_text(_pretty(request.arguments))
            if len(arguments) > MAX_ARGUMENTS_SHOWN:
                arguments = f"{arguments[:MAX_ARGUMENTS_SHOWN]}\n... ({len(arguments)} characters in all)"
            # A fence longer than any run of backticks in the arguments, so they cannot close it.
            fence = "`" * max(3, _longest_backtick_run(arguments) + 1)
            parts.append(f"**{request.tool}** (call `{request.call_id}`)\n\n{fence}\n{arguments}\n{fence}")
        return "\n\n".join(parts)

    def resume_kwargs(self) -> dict[str, str]:
        """What the resumed method gets back, to tell which approval the answer is for."""
        return {"step_key": self.step_key, "fingerprint": self.fingerprint}


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments


def _longest_backtick_run(text: str) -> int:
    longest = current = 0
    for character in text:
        current = current + 1 if character == "`" else 0
        longest = max(longest, current)
    return longest


class ApprovalDesk:
    """
    The decisions of one try's runs: recorded ones replay, the ``answer`` the try was resumed with
    is recorded once, and the first approval with neither becomes :attr:`pending`.
    """

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer = answer
        #: An earlier request of this task instance was answered: Airflow shows its text for the next.
        self.asked_before = answer is not None
        #: The approval this try must ask for, once a run stopped for one it has no decision for.
        self.pending: PendingApproval | None = None
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
            decision = self._answer_for(step, asked=asked)
            if decision is None:
                if self.pending is None and step.fingerprint is not None:
                    self.pending = PendingApproval(step.key, step.fingerprint, requests, asked=asked)
                    self._pending_step = step
                return None
            step.record(asdict(decision))
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

    def record_asked(self) -> None:
        """Record at the pending step that its request was made, before the task waits for the answer."""
        step = self._pending_step
        if step is None:
            raise ValueError("record_asked needs a desk with a pending approval")
        step.record(ASKED)
        step.run.journal.settle()

    def _answer_for(self, step: JournalStep, *, asked: bool) -> Decision | None:
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
def answering_approvals(answer: Answer | None = None) -> Iterator[ApprovalDesk]:
    """
    Inside this block, a durable run that stops for approvals goes on with the recorded decision
    or ``answer``, else ends with the SDK's interruptions and the desk's ``pending`` approval.
    Only an operator can give up its worker to wait for a person: a plain ``@task`` has no desk.
    """
    desk = ApprovalDesk(answer)
    token = _desk.set(desk)
    try:
        yield desk
    finally:
        _desk.reset(token)


def approval_desk() -> ApprovalDesk | None:
    """The approval desk of the running operator, if it answers approvals."""
    return _desk.get()


def answer_of(event: dict[str, Any], step_key: str | None, fingerprint: str | None) -> Answer:
    """
    The answer in the event a human-in-the-loop task resumes with. Raises
    :class:`ApprovalTimedOut` when the response timeout passed with no answer and no default.
    """
    if "error" in event:
        if event.get("error_type") == "timeout":
            raise ApprovalTimedOut(
                "Durable: nobody answered the approval request before its response_timeout, and the operator "
                "has no defaults; the journal is kept, so a retry or a clear asks again and replays the run"
            )
        raise ApprovalFailed(f"Durable: the approval request failed: {event.get('error')}")
    chosen = event.get("chosen_options") or []
    if chosen not in ([APPROVE], [REJECT]):
        raise ApprovalFailed(f"Durable: the approval request was answered with {chosen!r}, not {APPROVE} or {REJECT}")
    user = event.get("responded_by_user")
    by = user.get("name") or user.get("id") if isinstance(user, dict) else None
    decision = Decision(approved=chosen == [APPROVE], by=by, timed_out=bool(event.get("timedout")) and user is None)
    return Answer(step_key, fingerprint, decision)


def resumed_with(
    context: Any,
    event: dict[str, Any],
    step_key: str | None,
    fingerprint: str | None,
    not_before: datetime | None = None,
    *,
    method_name: str,
) -> Answer:
    """
    The answer a task resumed with (see :func:`answer_of`), once ``not_before`` (the task's
    deferral and :data:`RESUME_DELAY`) has passed. A journal this process opened for the try
    before it waited (``dag.test()`` resumes in the same process) is let go: the resumed run
    numbers its runs anew, as in a new worker.

    Airflow 3.3 resumes a deferred task at once when a person answers: should the scheduler still
    fail this try for the workload that deferred it (see ``approval_trigger.py``), it does so
    while the try waits here, before the approved call runs; the next try takes the answer.

    Under ``dag.test()``, whose trigger cannot read the answer, the task waits in
    ``awaiting_input`` for it instead (Airflow 3.3; ``dag.test()`` resumes it, and runs no
    executor whose reports could fail it), and ``method_name`` resumes it; before 3.3 it fails.
    """
    from airflow.sdk.timezone import utcnow

    from airflow.providers.common.ai.durable.approval_trigger import CANNOT_READ_ANSWERS
    from airflow.providers.common.ai.durable.task_instance import take_journal

    take_journal(context["ti"])
    if event.get("error_type") == CANNOT_READ_ANSWERS:
        try:
            from airflow.sdk.exceptions import TaskAwaitingInput
        except ImportError:  # Airflow before 3.3
            raise ApprovalFailed(
                "Durable: dag.test() of Airflow before 3.3 cannot wait for an approval: run the DAG under a "
                "scheduler and a triggerer, for example airflow standalone"
            ) from None
        log.info("Durable: this process cannot read the answer (dag.test()), so the task waits in awaiting_input")
        raise TaskAwaitingInput(method_name=method_name, kwargs={"step_key": step_key, "fingerprint": fingerprint})
    answer = answer_of(event, step_key, fingerprint)
    wait = (not_before - utcnow()).total_seconds() if not_before is not None else 0
    if wait > 0:
        log.info(
            "Durable: the answer came soon after the task deferred; going on in %.1f s, once the scheduler "
            "has heard that the workload that deferred it ended",
            wait,
        )
        time.sleep(wait)
    return answer


class ApprovalTimedOut(Exception):
    """Nobody answered an approval request in time, and the operator has no default."""


class ApprovalFailed(Exception):
    """An approval request ended without a usable answer."""


def check_defaults(defaults: str | list[str] | None, task_id: str) -> list[str] | None:
    """``defaults`` as the request takes them; refuses anything but Approve or Reject."""
    if defaults is None:
        return None
    listed = [defaults] if isinstance(defaults, str) else defaults
    if not isinstance(listed, list) or len(listed) != 1 or listed[0] not in OPTIONS:
        raise ValueError(
            f"AgentOperator {task_id!r}: defaults must be {APPROVE!r} or {REJECT!r} (taken when the "
            f"response_timeout passes without an answer), not {defaults!r}"
        )
    return listed


def wait_for_answer(
    operator: Any,
    context: Any,
    desk: ApprovalDesk,
    *,
    method_name: str,
    assigned_users: list[HITLUser] | None,
    response_timeout: timedelta | None,
    defaults: list[str] | None,
    notifiers: Sequence[Any],
) -> None:
    """
    Create the human-in-the-loop request for ``pending`` (unless an earlier try made it) and defer
    the task to :class:`~airflow.providers.common.ai.durable.approval_trigger.ApprovalTrigger`
    until a person answers, on every Airflow line. The task resumes in
    ``operator.<method_name>(context, event, step_key=..., fingerprint=..., not_before=...)``,
    which goes on no sooner than :data:`RESUME_DELAY` after the task deferred (see
    :func:`resumed_with`).

    Each request is also pushed to XCom under ``approval_request`` (subject, body, step): Airflow
    (3.2, 3.3) keeps one request per task instance, across tries, and shows the subject and body
    of its first for every later one; the XCom and the task log show the current one.
    """
    from airflow.sdk.execution_time.hitl import upsert_hitl_detail
    from airflow.sdk.timezone import utcnow

    from airflow.providers.common.ai.durable.approval_trigger import ApprovalTrigger

    pending = desk.pending
    if pending is None:
        raise ValueError("wait_for_answer needs a desk with a pending approval")
    request = {"subject": pending.subject, "body": pending.body, "step": pending.step_key}
    context["ti"].xcom_push(key=APPROVAL_REQUEST_XCOM_KEY, value=request)
    if desk.asked_before:
        log.warning(
            "Durable: Airflow shows this task instance's first approval request for every later one; "
            "the current request is in XCom %r and here subject=%r body=%r",
            APPROVAL_REQUEST_XCOM_KEY,
            pending.subject,
            pending.body,
        )
    tools = ", ".join(call.tool for call in pending.requests)
    ti_id = context["task_instance"].id
    if pending.asked:
        # Creating it again would erase the answer a person may have given it.
        log.info(
            "Durable: waiting for the answer to the request an earlier try made step=%s tools=%s",
            pending.step_key,
            tools,
        )
    else:
        upsert_hitl_detail(
            ti_id=ti_id,
            options=OPTIONS,
            subject=pending.subject,
            body=pending.body,
            defaults=defaults,
            multiple=False,
            params={},
            assigned_users=assigned_users,
        )
        desk.record_asked()
        log.info("Durable: waiting for a person to approve or reject step=%s tools=%s", pending.step_key, tools)
        for notifier in notifiers:
            notifier(context)
    now = utcnow()
    not_before = now + RESUME_DELAY
    operator.defer(
        trigger=ApprovalTrigger(
            ti_id=ti_id,
            options=OPTIONS,
            defaults=defaults,
            params={},
            multiple=False,
            timeout_datetime=now + response_timeout if response_timeout else None,
            not_before=not_before,
        ),
        method_name=method_name,
        kwargs={**pending.resume_kwargs(), "not_before": not_before},
    )
