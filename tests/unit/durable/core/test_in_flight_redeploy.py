"""
A call left in flight across a deploy that changes its run (R-56): the procedure after ``fail`` is
"deploy the DAG and clear", and a deploy that edits a tool's description or renames a tool changes
the run's first model call, so the retry no longer lines up with the journal. The call in flight is
still resolved by the policy of the tool that has its name now, before the changed run makes a live
call, or the try stops naming it; its mark is replaced only once it is resolved.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from agents import function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import AirflowFailException
from test_in_flight import REFUND, Payments, PaymentTask, agent, died_in_the_call, tool_outputs
from tries import WorkerDied

from airflow.providers.common.ai.durable.openai_agents import current_idempotency_key, in_flight


def redeployed(payments: Payments, policy: Any, *, name: str = "refund", description: str = "Refund an order.") -> Any:
    """The refund tool as a new deploy has it: under ``name``, described by ``description``."""

    @function_tool(name_override=name, description_override=description)
    def refund(order: str, card: str) -> str:
        payments.refunds.append(current_idempotency_key())
        return f"refunded {order} as R-{len(payments.refunds)}"

    return policy(refund) if policy is not None else refund


def asked(scripted: ScriptedModel) -> list[list[str]]:
    """The names of the tools each request that reached the model offered."""
    return [[tool.name for tool in call.tools] for call in scripted.calls]


#: The changed run's model asks for the refund again, under a call id of its own.
REFUND_AGAIN = function_call("refund", {"order": "A-1", "card": "4111 1111 1111 1111"}, call_id="c9")
EDITED = "Refund an order to the card it was paid with; never twice."


def test_a_description_edited_by_a_deploy_still_verifies_the_call_in_flight_and_never_runs_it_again(caplog):
    task, payments = PaymentTask(), Payments()
    policy = in_flight("verify", verify=payments.find)
    died_in_the_call(task, payments, policy)
    key = payments.refunds[0]

    # The changed run's model asks for the same refund again: it is the call in flight, which happened.
    second = ScriptedModel([[REFUND_AGAIN], [assistant_message("Refunded.")]])
    with caplog.at_level(logging.INFO):
        result = task.attempt(agent(second, redeployed(payments, policy, description=EDITED)))
    assert payments.refunds == [key]  # exactly once
    assert payments.verified == [(key, {"order": "A-1", "card": "4111 1111 1111 1111"})]
    assert tool_outputs(second) == [[], ["refund 1 already made"]]
    assert result.final_output == "Refunded."
    assert (
        "tool 'refund' at 1.2 was in flight when a try died and its run changed since; verify: it happened"
        in caplog.text
    )
    assert task.journal.stats.in_flight == [
        {"step": "1.2", "tool": "refund", "idempotency_key": key, "policy": "verify", "outcome": "it happened"},
    ]
    entries = task.entries()
    assert (entries["1.2"]["state"], entries["1.2"]["meta"]["in_flight"]) == ("done", "verify: it happened")
    assert (entries["2.2"]["state"], entries["2.2"]["meta"]["in_flight"]) == ("done", "verify: it happened")
    assert not [key for key, entry in entries.items() if entry.get("state") == "in_flight"]

    # A later try replays the changed run: neither verify nor the refund runs.
    third = ScriptedModel([])
    task.attempt(agent(third, redeployed(payments, policy, description=EDITED)))
    assert payments.refunds == [key] and len(payments.verified) == 1 and not third.calls


def test_a_call_in_flight_that_did_not_happen_is_run_once_by_the_changed_run_when_its_model_asks_for_it():
    task, payments = PaymentTask(), Payments()
    policy = in_flight("verify", verify=payments.find)
    payments.dies = "before"
    with pytest.raises(WorkerDied):
        task.attempt(agent(ScriptedModel([[REFUND]]), payments.tool(policy)))
    payments.dies = None

    second = ScriptedModel([[REFUND_AGAIN], [assistant_message("Refunded.")]])
    task.attempt(agent(second, redeployed(payments, policy, description=EDITED)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 1
    assert tool_outputs(second) == [[], ["refunded A-1 as R-1"]]
    entries = task.entries()
    assert (entries["1.2"]["state"], entries["1.2"]["meta"]["in_flight"]) == ("discarded", "verify: it did not happen")
    assert task.journal.stats.in_flight[0]["outcome"] == "it did not happen"


def test_a_call_in_flight_verified_as_done_stays_in_flight_until_the_changed_run_ends():
    # A try that dies after verify said it happened, before its run ended, leaves the mark: the next
    # try asks verify again rather than let the model's new request for the refund run it.
    task, payments = PaymentTask(), Payments()
    policy = in_flight("verify", verify=payments.find)
    died_in_the_call(task, payments, policy)
    mark = task.entries()["1.2"]

    with pytest.raises(Exception):
        task.attempt(agent(ScriptedModel([]), redeployed(payments, policy, description=EDITED)))
    assert len(payments.verified) == 1 and task.entries()["1.2"] == mark

    third = ScriptedModel([[REFUND_AGAIN], [assistant_message("Refunded.")]])
    task.attempt(agent(third, redeployed(payments, policy, description=EDITED)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 2
    assert tool_outputs(third) == [[], ["refund 1 already made"]]


def test_a_description_edited_by_a_deploy_under_fail_stops_the_try_before_the_model_naming_the_call():
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments, in_flight("fail"))
    mark = task.entries()["1.2"]

    second = ScriptedModel([[assistant_message("Refunded.")]])
    with pytest.raises(AirflowFailException) as failed:
        task.attempt(agent(second, redeployed(payments, in_flight("fail"), description=EDITED)))
    message = str(failed.value)
    assert "'refund' was in flight at 1.2" in message and payments.refunds[0] in message
    assert "its run changed since it was recorded" in message and "its tool's policy is 'fail'" in message
    assert len(payments.refunds) == 1 and not second.calls
    assert task.entries()["1.2"] == mark  # kept until resolved

    # The docs' procedure: give the tool the policy that fits, deploy, clear.
    policy = in_flight("verify", verify=payments.find)
    third = ScriptedModel([[assistant_message("Refunded.")]])
    task.attempt(agent(third, redeployed(payments, policy, description=EDITED)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 1
    assert asked(third) == [["refund"]] and task.entries()["1.2"]["state"] == "done"


@pytest.mark.parametrize("policy", ["verify", "fail"])
def test_a_tool_renamed_by_a_deploy_stops_the_try_naming_the_call_in_flight(policy):
    task, payments = PaymentTask(), Payments()
    chosen = in_flight("fail") if policy == "fail" else in_flight("verify", verify=payments.find)
    died_in_the_call(task, payments, chosen)
    mark = task.entries()["1.2"]

    # Without the fix the changed run's model asks for the refund under its new name, and it runs.
    issue = function_call("issue_refund", {"order": "A-1", "card": "4111 1111 1111 1111"}, call_id="c9")
    second = ScriptedModel([[issue], [assistant_message("Refunded.")]])
    with pytest.raises(AirflowFailException) as failed:
        task.attempt(agent(second, redeployed(payments, chosen, name="issue_refund")))
    message = str(failed.value)
    assert "'refund' was in flight at 1.2" in message and payments.refunds[0] in message
    assert "no tool of the agent is named 'refund' now" in message
    assert len(payments.refunds) == 1 and payments.verified == [] and not second.calls
    assert task.entries()["1.2"] == mark

    # A tool under the old name resolves it by its policy, the renamed one beside it.
    verify = in_flight("verify", verify=payments.find)
    third = ScriptedModel([[assistant_message("Refunded.")]])
    task.attempt(agent(third, redeployed(payments, verify, name="issue_refund"), redeployed(payments, verify)))
    assert len(payments.refunds) == 1 and len(payments.verified) == 1
    assert asked(third) == [["issue_refund", "refund"]] and task.entries()["1.2"]["state"] == "done"


def test_a_rerun_call_in_flight_of_a_changed_run_is_not_run_again_by_the_journal_and_a_warning_names_it(caplog):
    task, payments = PaymentTask(), Payments()
    died_in_the_call(task, payments)
    key = payments.refunds[0]

    second = ScriptedModel([[assistant_message("Refunded.")]])
    with caplog.at_level(logging.WARNING):
        task.attempt(agent(second, redeployed(payments, None, description=EDITED)))
    assert payments.refunds == [key]
    assert f"step=tool 'refund' at 1.2 idempotency_key={key}" in caplog.text
    assert task.entries()["1.2"]["state"] == "discarded"
