"""
Agents reached through ``handoff()`` objects, and function tools whose ``needs_approval`` is a
function, are journaled like the rest of the run (R-37).
"""

from __future__ import annotations

from collections import Counter

import tries
from agents import Agent, RunContextWrapper, function_tool, handoff
from agents.extensions import handoff_filters
from agents.testing import ScriptedModel, assistant_message, function_call
from tries import WorkerDied


class Task(tries.Task):
    prompt = "refund order 7"


class Shop:
    """A triage agent that hands off to billing through a handoff() object; billing looks up and refunds."""

    def __init__(
        self, runs: Counter[str], *, retry: bool = False, refund_dies: bool = False, lookup_asks: bool = False
    ) -> None:
        self.handoffs: list[str] = []
        self.approval_checks: list[str] = []

        async def asks(ctx: RunContextWrapper, args: dict, call_id: str) -> bool:
            self.approval_checks.append(call_id)
            return lookup_asks

        @function_tool(needs_approval=asks)
        def lookup(order: str) -> str:
            """Look an order up."""
            runs["lookup"] += 1
            return f"order {order}: 12 EUR"

        @function_tool
        def refund(order: str) -> str:
            """Refund an order."""
            runs["refund"] += 1
            if refund_dies:
                raise WorkerDied
            return f"refunded {order}"

        # A retry is scripted with only what the failed try never got: a request that should have
        # replayed takes the next answer instead, and the request counts show it.
        tool_calls = [
            function_call("lookup", {"order": "7"}, call_id="l1"),
            function_call("refund", {"order": "7"}, call_id="r1"),
        ]
        self.billing = Agent(
            name="billing",
            model=ScriptedModel(([] if retry else [tool_calls]) + [[assistant_message("refunded")]]),
            tools=[lookup, refund],
        )
        self.triage = Agent(
            name="triage",
            model=ScriptedModel([] if retry else [[function_call("transfer_to_billing", {}, call_id="h1")]]),
            handoffs=[
                handoff(
                    self.billing,
                    on_handoff=lambda ctx: self.handoffs.append("billing"),
                    input_filter=handoff_filters.remove_all_tools,
                )
            ],
        )

    def requests(self) -> tuple[int, int]:
        return len(self.triage.model.calls), len(self.billing.model.calls)


def test_an_agent_reached_through_a_handoff_object_replays_its_model_and_tools_on_retry():
    runs: Counter[str] = Counter()
    task = Task()
    first = Shop(runs, refund_dies=True)
    task.failing_attempt(first.triage, WorkerDied)
    assert first.requests() == (1, 1)
    assert runs == {"lookup": 1, "refund": 1}

    second = Shop(runs, retry=True)
    result = task.attempt(second.triage)

    assert result.final_output == "refunded"
    assert result.last_agent is second.billing
    # Triage's answer and billing's first answer replay; billing's final answer is the one live request.
    assert second.requests() == (0, 1)
    # The lookup replays; the refund was cut off mid-call, so it runs again.
    assert runs == {"lookup": 1, "refund": 2}
    assert task.replayed == {"model": 2, "tool": 1}
    # on_handoff and the input filter are the SDK's own callbacks: they run on every try.
    assert second.handoffs == ["billing"]


def test_a_tool_whose_needs_approval_is_a_function_is_journaled_and_the_function_asked_every_try():
    runs: Counter[str] = Counter()
    task = Task()
    first = Shop(runs, refund_dies=True)
    task.failing_attempt(first.triage, WorkerDied)

    second = Shop(runs, retry=True)
    task.attempt(second.triage)

    assert runs["lookup"] == 1
    assert first.approval_checks == second.approval_checks == ["l1"]


def test_a_needs_approval_function_that_decides_otherwise_on_the_retry_stops_the_run_for_approval():
    runs: Counter[str] = Counter()
    task = Task()
    task.failing_attempt(Shop(runs, refund_dies=True).triage, WorkerDied)

    second = Shop(runs, retry=True, lookup_asks=True)
    result = task.attempt(second.triage)

    # The recorded lookup is not handed back past an approval the function now asks for.
    assert [item.raw_item.call_id for item in result.interruptions] == ["l1"]
    # The refund, which needs no approval, ran again as the SDK runs it beside the interruption.
    assert runs == {"lookup": 1, "refund": 2}
