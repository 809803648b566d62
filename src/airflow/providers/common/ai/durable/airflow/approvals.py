"""
Approvals' Airflow half: :func:`wait_for_answer` creates the human-in-the-loop request, records at
the step that it was asked and defers the task to the triggerer; :func:`resumed_with` reads the
answer the task resumes with. The approval steps themselves are the journal's
(``durable/core/approvals.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.common.ai.durable.core import in_flight
from airflow.providers.common.ai.durable.core.approvals import (
    APPROVE,
    OPTIONS,
    REJECT,
    Answer,
    ApprovalDesk,
    Decision,
)

if TYPE_CHECKING:
    from airflow.sdk.execution_time.hitl import HITLUser

# The logger of the module this code was in before the layout moved it: log settings name it.
log = logging.getLogger("airflow.providers.common.ai.durable.approvals")

#: The least time from deferring for an answer to resuming with it: longer than a busy worker takes
#: to end and be reported to the scheduler (see ``approval_trigger.py``).
RESUME_DELAY = timedelta(seconds=15)
#: The XCom key of the request a task waits for: what Airflow shows of a task instance's later requests is stale.
APPROVAL_REQUEST_XCOM_KEY = "approval_request"


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
    user = event.get("responded_by_user")
    by = user.get("name") or user.get("id") if isinstance(user, dict) else None
    if len(chosen) == 1 and chosen[0] in in_flight.OPTIONS:
        # About a call found in flight: the person may have written the output to hand the model.
        output = (event.get("params_input") or {}).get(in_flight.OUTPUT_PARAM)
        text = output if isinstance(output, str) and output.strip() else in_flight.DEFAULT_OUTPUT
        return Answer(step_key, fingerprint, in_flight.InFlightDecision(chosen[0], text, by))
    if chosen not in ([APPROVE], [REJECT]):
        raise ApprovalFailed(f"Durable: the approval request was answered with {chosen!r}, not {APPROVE} or {REJECT}")
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

    from airflow.providers.common.ai.durable.airflow.approval_trigger import CANNOT_READ_ANSWERS
    from airflow.providers.common.ai.durable.airflow.task_instance import take_journal

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


def _output_form() -> dict[str, Any]:
    """The request's form for a call found in flight: the output to hand the model if it happened."""
    from airflow.sdk import Param

    param = Param(
        in_flight.DEFAULT_OUTPUT,
        type="string",
        title="What to tell the agent the call returned (if it happened)",
    )
    return {in_flight.OUTPUT_PARAM: param.serialize()}


def check_approvals_supported(task_id: str, what: str) -> None:
    """Refuses ``what`` (an approval feature a task asks for) on an Airflow line without human-in-the-loop."""
    from airflow import __version__
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

    if not AIRFLOW_V_3_2_PLUS:
        raise ApprovalsNotSupported(
            f"AgentOperator {task_id!r}: approvals ({what}) need Airflow's human-in-the-loop support, which "
            f"Airflow 3.2 and later have, not Airflow {__version__}: upgrade Airflow, or let the tools run without "
            "approval"
        )


class ApprovalsNotSupported(Exception):
    """Approvals asked for on an Airflow line without human-in-the-loop support."""


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
) -> NoReturn:
    """
    Create the human-in-the-loop request for ``pending`` (unless an earlier try made it) and defer
    the task to :class:`~airflow.providers.common.ai.durable.airflow.approval_trigger.ApprovalTrigger`
    until a person answers, on every Airflow line. The task resumes in
    ``operator.<method_name>(context, event, step_key=..., fingerprint=..., not_before=...)``,
    which goes on no sooner than :data:`RESUME_DELAY` after the task deferred (see
    :func:`resumed_with`).

    Each request is also pushed to XCom under ``approval_request`` (subject, body, step): Airflow
    (3.2, 3.3) keeps one request per task instance, across tries, and shows the subject and body
    of its first for every later one; the XCom and the task log show the current one.
    """
    pending = desk.pending
    if pending is None:
        raise ValueError("wait_for_answer needs a desk with a pending approval")
    params: dict[str, Any] = {}
    if isinstance(pending, in_flight.PendingInFlightQuestion):
        # Approve and Reject do not answer it: a response timeout fails the task, journal kept.
        tools, defaults, params = f"{pending.tool} (found in flight)", None, _output_form()
        asking = "to say whether it took effect"
    else:
        tools, asking = ", ".join(call.tool for call in pending.requests), "to approve or reject"
    check_approvals_supported(operator.task_id, f"{tools}, asked by the agent")
    from airflow.sdk.execution_time.hitl import upsert_hitl_detail
    from airflow.sdk.timezone import utcnow

    from airflow.providers.common.ai.durable.airflow.approval_trigger import ApprovalTrigger

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
            options=pending.options,
            subject=pending.subject,
            body=pending.body,
            defaults=defaults,
            multiple=False,
            params=params,
            assigned_users=assigned_users,
        )
        desk.record_asked()
        log.info("Durable: waiting for a person %s step=%s tools=%s", asking, pending.step_key, tools)
        for notifier in notifiers:
            notifier(context)
    now = utcnow()
    not_before = now + RESUME_DELAY
    operator.defer(
        trigger=ApprovalTrigger(
            ti_id=ti_id,
            options=pending.options,
            defaults=defaults,
            params=params,
            multiple=False,
            timeout_datetime=now + response_timeout if response_timeout else None,
            not_before=not_before,
        ),
        method_name=method_name,
        kwargs={**pending.resume_kwargs(), "not_before": not_before},
    )
    raise AssertionError("BaseOperator.defer raises TaskDeferred")
