"""
What a retry does with a call that an earlier try started and never finished (R-56): the call was
running when that try died, so whether its effect happened is unknown. A tool names its policy:

``rerun`` (the default)
    The call runs again with the same idempotency key (R-27); a warning names it, unless the tool
    is marked ``safe_to_repeat``.
``verify``
    A function the tool names is given the call's idempotency key and arguments and asks the
    outside system: it returns :class:`Happened` with the output to hand the model (the call is
    recorded as done with it and does not run), or ``None`` when the effect did not happen (the
    call runs). If it raises, the try fails and the call stays in flight for the next try.
``ask``
    A person decides through a human-in-the-loop request: it happened (with the output to hand
    the model), it did not happen and runs, or the task fails.
``fail``
    The task fails for good, naming the call, its key and its masked arguments; the journal is
    kept.

How each uncertain call was resolved is recorded with its entry (``meta["in_flight"]``), and each
try's summary, usage and the journal page say it. Neutral of any agent framework and of Airflow:
what it needs of the system (the error that fails a task for good, whether a person can be asked)
its host says (``core/host.py``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.providers.common.ai.durable.core.host import Host, current_host
from airflow.providers.common.ai.durable.core.masking import masked_text, shown_arguments

RERUN, VERIFY, ASK, FAIL = "rerun", "verify", "ask", "fail"
POLICIES = (RERUN, VERIFY, ASK, FAIL)

#: Where an in-flight entry and the result that resolves it keep how the call was resolved (a storage name).
RESOLUTION_META = "in_flight"
#: When the call started, in an in-flight entry's ``meta`` (ISO 8601, UTC; a storage name).
STARTED_META = "started"
#: In an in-flight entry's ``meta``: the policy its tool had when the call started (a storage name).
POLICY_META = "policy"
#: In an in-flight entry's ``meta``: a person was asked about it and has not been heard (a storage name).
ASKED_META = "asked"

#: The options of a request about a call in flight: the first says it happened, the second runs it, the third fails.
HAPPENED, RUN_IT, FAIL_TASK = "It happened", "It did not happen: run it", "Fail the task"
OPTIONS = [HAPPENED, RUN_IT, FAIL_TASK]
#: The form field of that request that holds the output to hand the model when it happened.
OUTPUT_PARAM = "output"
#: The output handed to the model when a person says the call happened and gives none.
DEFAULT_OUTPUT = "The call completed; its result was not recorded."


@dataclass(frozen=True)
class Happened:
    """What a ``verify`` function returns when the call's effect happened: the ``output`` to hand the model."""

    output: Any


#: What a ``verify`` function returns: :class:`Happened`, or ``None`` when the effect did not happen.
Verified = Happened | None


@dataclass(frozen=True)
class InFlightPolicy:
    """
    A tool's policy for a call of it found in flight. ``tools`` overrides it for some tools of an
    MCP server (by the server's tool name).
    """

    policy: str = RERUN
    verify: Callable[[str, Any], Verified | Awaitable[Verified]] | None = None
    safe_to_repeat: bool = False
    tools: Mapping[str, InFlightPolicy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"in_flight: the policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        if (self.policy == VERIFY) != (self.verify is not None):
            raise ValueError(
                "in_flight: give verify= (a function of the idempotency key and the arguments) with the policy "
                f"'verify', and only with it; the policy is {self.policy!r}"
            )
        if self.verify is not None and not callable(self.verify):
            raise TypeError(f"in_flight: verify must be a function, not {type(self.verify).__name__}")
        if self.safe_to_repeat and self.policy != RERUN:
            raise ValueError(f"in_flight: safe_to_repeat goes with the policy 'rerun', not {self.policy!r}")
        if not isinstance(self.tools, Mapping) or not all(
            isinstance(name, str) and isinstance(policy, InFlightPolicy) and not policy.tools
            for name, policy in self.tools.items()
        ):
            raise TypeError(
                "in_flight: tools must map tool names to in_flight(...) policies (without tools of their own)"
            )
        asks = self.policy == ASK or any(policy.policy == ASK for policy in self.tools.values())
        if asks and (reason := current_host().asking_unsupported()) is not None:
            raise ValueError(f"in_flight: the policy 'ask' {reason}")

    def for_tool(self, name: str) -> InFlightPolicy:
        """The policy of the tool ``name`` (of an MCP server): its override, else this one."""
        return self.tools.get(name, self)


#: The policy of a tool that names none.
DEFAULT_POLICY = InFlightPolicy()

#: The attribute a tool (or a server of tools) keeps its in-flight policy under, whatever its framework.
_POLICY_ATTRIBUTE = "_airflow_durable_in_flight"


def attach_policy(target: Any, policy: InFlightPolicy) -> Any:
    """Attach ``policy`` to ``target``, a tool or a server of tools of an agent framework; returns ``target``."""
    setattr(target, _POLICY_ATTRIBUTE, policy)
    return target


def attached_policy(target: Any) -> InFlightPolicy | None:
    """The policy :func:`attach_policy` attached to ``target``, if any."""
    policy = getattr(target, _POLICY_ATTRIBUTE, None)
    return policy if isinstance(policy, InFlightPolicy) else None


def started_now() -> dict[str, str]:
    """The ``meta`` of an in-flight mark written as the call starts."""
    return {STARTED_META: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def arguments_of(text: str) -> Any:
    """A call's arguments as a verify function gets them: the JSON the model wrote, loaded; else the text."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


#: What to do about a call in flight that failed the task, in its error.
GIVE_A_POLICY = "give the tool the policy that fits (rerun, verify or ask) and clear the task"


def unresolved(
    tool: str,
    step_key: str,
    idempotency_key: str,
    arguments: str,
    why: str,
    fix: str = GIVE_A_POLICY,
    *,
    host: Host | None = None,
) -> Exception:
    """
    The error that fails the task for good over a call in flight (the host's, by default the
    current one's): it names the call, its key and its masked arguments.
    """
    return (host or current_host()).failing_error(
        f"Durable: tool {tool!r} was in flight at {step_key} when an earlier try died, so whether it took "
        f"effect is unknown, and {why}. Its idempotency key is {idempotency_key} and its arguments were "
        f"{masked_text(arguments)[:2000]}. The journal is kept: check the outside system by that key, then "
        f"{fix}."
    )


@dataclass(frozen=True)
class InFlightDecision:
    """A person's answer about a call in flight: one of :data:`OPTIONS`, the output to hand the model, who gave it."""

    choice: str
    output: str = DEFAULT_OUTPUT
    by: str | None = None

    def describe(self) -> str:
        said = {HAPPENED: "it happened", RUN_IT: "it did not happen, run it", FAIL_TASK: "fail the task"}
        return f"{said[self.choice]} (asked: {self.by or 'an unnamed user'})"


@dataclass(frozen=True)
class PendingInFlightQuestion:
    """What a try must ask a person about a call in flight before its run can go on."""

    step_key: str
    fingerprint: str
    tool: str
    idempotency_key: str
    arguments: str
    started: str | None
    #: An earlier try made this request: its answer, if one was given, is Airflow's to hand back.
    asked: bool = False

    options = OPTIONS

    @property
    def subject(self) -> str:
        return f"Did {self.tool} take effect before its task was cut off?"

    @property
    def body(self) -> str:
        """The call, its key, when it started and its masked arguments, as Markdown."""
        started = f", started {self.started}" if self.started else ""
        return (
            f"**{self.tool}** was in flight when a try of this task died (step `{self.step_key}`{started}); "
            f"whether it took effect is unknown.\n\nIdempotency key: `{self.idempotency_key}`\n\n"
            f"{shown_arguments(self.arguments)}\n\nCheck the outside system by the key, then choose: **{HAPPENED}** "
            f"(write in *{OUTPUT_PARAM}* what to tell the agent), **{RUN_IT}**, or **{FAIL_TASK}**."
        )

    def resume_kwargs(self) -> dict[str, str]:
        return {"step_key": self.step_key, "fingerprint": self.fingerprint}
