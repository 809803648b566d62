"""
Approvals' Airflow half: :func:`wait_for_answer` creates the human-in-the-loop request, records at
the step that it was asked and defers the task to the triggerer; :func:`resumed_with` reads the
answer the task resumes with, and :func:`going_on_at` holds the resumed try until it is safe to
act on it. The approval steps themselves are the journal's (``durable/core/approvals.py``).

When each of these waits, and why (Airflow's defer race), is in ``docs/approvals.rst``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.common.ai.durable.airflow.binding import AIRFLOW_HOST
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

log = logging.getLogger(__name__)

#: ``[common.ai] approval_resume_delay``'s default: the least time from deferring for an answer to
#: acting on it, longer than a busy worker takes to end and be reported to the scheduler (see
#: ``approval_trigger.py``).
RESUME_DELAY = timedelta(seconds=15)
#: ``[common.ai] approval_wait_in_worker``'s default: how long a task that made a request holds its
#: worker before it defers (Airflow 3.3+), so that a quick answer lands while it still runs.
WAIT_IN_WORKER = timedelta(seconds=20)
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


def approval_timing() -> tuple[timedelta, timedelta]:
    """
    ``[common.ai] approval_wait_in_worker`` and ``approval_resume_delay``; refuses anything but a
    number of seconds from 0 to a day, for good: a retry would meet the same option.
    """
    return _seconds("approval_wait_in_worker", WAIT_IN_WORKER), _seconds("approval_resume_delay", RESUME_DELAY)


def _seconds(option: str, default: timedelta) -> timedelta:
    from airflow.configuration import conf

    value = conf.get("common.ai", option, fallback="")
    text = str(value).strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= 86400:
        raise AIRFLOW_HOST.failing_error(
            f"Durable: [common.ai] {option} must be a number of seconds from 0 to 86400, not {value!r}: for "
            f"example {default.total_seconds():g}; fix it and clear the task (its journal is kept)"
        )
    return timedelta(seconds=seconds)


def going_on_at(not_before: datetime | None) -> Callable[[], None]:
    """
    What a resumed try calls once it has recorded the answer, before it acts on it: waits until
    ``not_before`` (its deferral and ``approval_resume_delay``). Airflow 3.3 resumes a deferred
    task the moment a person answers; should the scheduler still fail this try for the workload
    that deferred it (see ``approval_trigger.py``), it does so while the try waits here, after the
    answer is in the journal and before the approved call runs: the next try replays the answer.
    """

    def going_on() -> None:
        from airflow.sdk.timezone import utcnow

        wait = (not_before - utcnow()).total_seconds() if not_before is not None else 0
        if wait > 0:
            log.info(
                "Durable: the answer came soon after the task deferred and is recorded; going on in %.1f s, once "
                "the scheduler has heard that the workload that deferred it ended",
                wait,
            )
            time.sleep(wait)

    return going_on


def resumed_with(
    context: Any,
    event: dict[str, Any],
    step_key: str | None,
    fingerprint: str | None,
    *,
    method_name: str,
) -> Answer:
    """
    The answer a task resumed with (see :func:`answer_of`). A journal this process opened for the
    try before it waited (``dag.test()`` resumes in the same process) is let go: the resumed run
    numbers its runs anew, as in a new worker. The try records the answer before it acts on it,
    and acts no sooner than :func:`going_on_at` says.

    Under ``dag.test()``, whose trigger cannot read the answer, the task waits in
    ``awaiting_input`` for it instead (Airflow 3.3; ``dag.test()`` resumes it, and runs no
    executor whose reports could fail it), and ``method_name`` resumes it; before 3.3 it fails.
    """
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
    return answer_of(event, step_key, fingerprint)


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
    which acts on the answer no sooner than ``approval_resume_delay`` after the task deferred (see
    :func:`going_on_at`). On Airflow 3.3+ a task that made a new request first holds its worker
    for ``approval_wait_in_worker``: an answer given meanwhile is taken by the trigger, never by
    Airflow's resume of a task that deferred a moment ago (see ``docs/approvals.rst``).

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
    hold, resume_delay = approval_timing()
    if pending.asked:
        # Creating it again would erase the answer a person may have given it. No hold: the
        # request appeared long ago, so an answer is no likelier now than at any other moment.
        hold = timedelta(0)
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
    if hold and _resumes_at_an_answer():
        log.info(
            "Durable: holding the worker %.0f s before deferring, so that a quick answer is taken safely "
            "([common.ai] approval_wait_in_worker)",
            hold.total_seconds(),
        )
        time.sleep(hold.total_seconds())
    now = utcnow()
    not_before = now + resume_delay
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


def _resumes_at_an_answer() -> bool:
    """
    Whether Airflow resumes this task the moment a person answers its request while it is
    deferred: its REST API does from 3.3 on (before, only the trigger resumes it), in a worker
    that an executor started (``dag.test()`` runs no executor, so no report of one can fail it).
    """
    from airflow.providers.common.ai._airflow_private import is_run_by_an_executor
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_3_PLUS

    return AIRFLOW_V_3_3_PLUS and is_run_by_an_executor()
