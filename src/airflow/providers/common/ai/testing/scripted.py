"""
A journal file (``airflow common-ai journal export``) as an ``agents.testing.ScriptedModel``
script and tool stubs, for tests that run an agent with the SDK's own test model and no journal.

:func:`scripted_from_file` gives a :class:`RecordedScript`: ``model`` is a ``ScriptedModel``
holding one step per recorded model call, each answered **by the request**: a call gets the
recorded answer of the recorded call that asked exactly the same (its fingerprint, as a retry
matches it), whatever the order. A call that asks something else fails with
:class:`ScriptMiss`, naming the recorded call it was expected to be and what differs, as the task
log names a divergence: the model, the instructions, the first input item (message) that
differs, the tools. ``stubbed(tool)`` is a copy of a function tool that answers with the
recorded result of a call with the same arguments instead of running, and fails naming the
recorded calls of that tool when the arguments differ; a call whose recorded result held a
secret (stored masked) runs the tool, as a replay does (``ran`` names it)::

    recorded = scripted_from_file("tests/fixtures/triage.json")
    agent = Agent(name="triage", model=recorded.model, tools=[recorded.stubbed(lookup_ticket)], ...)
    result = Runner.run_sync(agent, "Triage ticket T-5.")

Fingerprints are keyed by ``[core] fernet_key``: give ``fernet_key=`` the recording deployment's
key when it is not the test's (as for ``replay_offline``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import FunctionTool, ModelResponse
from pydantic import TypeAdapter

from airflow.providers.common.ai.durable.core.divergence import (
    ModelCalls,
    parts_in_full,
    tool_call_parts,
    why_calls_differ,
)
from airflow.providers.common.ai.durable.core.fingerprint import recorded_form
from airflow.providers.common.ai.durable.core.journal_file import JournalFile
from airflow.providers.common.ai.durable.openai_agents._model import request_of
from airflow.providers.common.ai.testing.replay import check_fingerprint_key, fingerprinted_with, load_journal_file

_RESPONSES = TypeAdapter(ModelResponse)


def _answer_of(entry: dict[str, Any]) -> Any:
    """A recorded model answer with its usage: from ``meta`` where the entry leaves it out (format 8)."""
    result = entry.get("result")
    if not isinstance(result, dict) or "usage" in result:
        return result
    meta = entry.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    tokens = {field: meta[field] for field in ("input_tokens", "output_tokens") if isinstance(meta.get(field), int)}
    total = meta.get("tokens") if isinstance(meta.get("tokens"), int) else sum(tokens.values())
    return {**result, "usage": {"requests": 1, **tokens, "total_tokens": total}}


class ScriptMiss(AssertionError):
    """A call that asks something no recorded call asked: what it was expected to be, and what differs."""


@dataclass
class _Recorded:
    key: str
    entry: dict[str, Any]
    used: bool = False


@dataclass
class RecordedScript:
    """A journal file's model answers and tool results, for ``ScriptedModel`` and tool stubs."""

    journal_file: JournalFile
    fernet_key: str | None = None
    #: The recorded model calls and tool calls, in the order they ran.
    model_calls: list[_Recorded] = field(default_factory=list)
    tool_calls: list[_Recorded] = field(default_factory=list)
    #: The keys of the recorded steps the run was answered from, in the order it used them; and of
    #: the tool calls whose recorded result held a secret (stored masked), which ran as in a replay.
    answered: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    _calls: ModelCalls = field(default_factory=ModelCalls)
    _model: Any = None

    @property
    def model(self) -> Any:
        """An ``agents.testing.ScriptedModel`` with a step per recorded model call, each answered by its request."""
        if self._model is None:
            from agents.testing import ModelStep, ScriptedModel

            self._model = ScriptedModel([ModelStep.respond(self._answer) for _ in self.model_calls])
        return self._model

    def _answer(self, call: Any) -> ModelResponse:
        asked = {
            "system_instructions": call.system_instructions,
            "input": call.input,
            "model_settings": call.model_settings,
            "tools": call.tools,
            "output_schema": call.output_schema,
            "handoffs": call.handoffs,
            "prompt": call.prompt,
        }
        names = list(dict.fromkeys(str(recorded.entry.get("name")) for recorded in self.model_calls))
        with fingerprinted_with(self.fernet_key):
            described = {
                name: self._calls.fingerprint_and_parts(request_of(name, asked), what="a model call") for name in names
            }
            for recorded in self.model_calls:
                fingerprint = described[str(recorded.entry.get("name"))][0]
                if not recorded.used and recorded_form(recorded.entry.get("fingerprint"), fingerprint) is not None:
                    recorded.used = True
                    self.answered.append(recorded.key)
                    return _RESPONSES.validate_python(_answer_of(recorded.entry))
            expected = next((recorded for recorded in self.model_calls if not recorded.used), None)
            if expected is None:
                raise ScriptMiss(f"a model call came after every recorded one was answered ({len(self.model_calls)})")
            fingerprint, parts = described[str(expected.entry.get("name"))]
            # The recorded parts are in full (see scripted_from_file): none is left out to fill.
            why = why_calls_differ(expected.entry, fingerprint or "", parts, lined_up=False)
        raise ScriptMiss(
            f"model call {len(self.answered) + 1} of the run is no recorded call: it was expected to be "
            f"model {expected.entry.get('name')!r} at {expected.key}, and {why}"
        )

    def stubbed(self, tool: FunctionTool) -> FunctionTool:
        """A copy of ``tool`` that answers with the recorded result of a call with the same arguments, never running."""
        recorded_calls = [recorded for recorded in self.tool_calls if recorded.entry.get("name") == tool.name]

        async def invoke(context: Any, arguments: str) -> Any:
            with fingerprinted_with(self.fernet_key):
                asked = tool_call_parts(tool.name, arguments, "")["arguments"]
            for recorded in recorded_calls:
                parts = recorded.entry.get("parts") or {}
                if not recorded.used and parts.get("arguments") == asked:
                    recorded.used = True
                    if recorded.entry.get("state") == "masked":
                        # Its result held a secret and is stored masked: it runs, as a replay runs it.
                        self.ran.append(recorded.key)
                        return await tool.on_invoke_tool(context, arguments)
                    self.answered.append(recorded.key)
                    return (recorded.entry.get("result") or {}).get("value")
            where = ", ".join(recorded.key for recorded in recorded_calls) or "none"
            raise ScriptMiss(
                f"tool {tool.name!r} was called with arguments no unused recorded call of it had: {arguments[:300]} "
                f"(its recorded calls: {where})"
            )

        return dataclasses.replace(tool, on_invoke_tool=invoke)

    def assert_complete(self) -> None:
        """Fail naming the recorded steps the run did not use."""
        unused = [recorded.key for recorded in [*self.model_calls, *self.tool_calls] if not recorded.used]
        if unused:
            raise ScriptMiss(f"the run did not use the recorded steps {', '.join(unused)}")


def scripted_from_file(journal_file: str | Path | JournalFile, *, fernet_key: str | None = None) -> RecordedScript:
    """
    The journal file's recorded model answers as a ``ScriptedModel`` (``.model``) and its tool
    results as stubs (``.stubbed(tool)``), each matched by what the call asks; refuses a file
    whose fingerprints were taken under another key than ``fernet_key`` (or the test's).
    """
    journal_file = journal_file if isinstance(journal_file, JournalFile) else load_journal_file(journal_file)
    with fingerprinted_with(fernet_key):
        check_fingerprint_key(journal_file)
    script = RecordedScript(journal_file, fernet_key)
    full_parts = parts_in_full(journal_file.steps)
    for key, entry in journal_file.steps:
        if entry.get("state") not in ("done", "masked"):
            continue  # a call in flight or failed has no answer to give
        if entry.get("kind") == "model":
            script.model_calls.append(_Recorded(key, {**entry, "parts": full_parts.get(key, entry.get("parts"))}))
        elif entry.get("kind") == "tool":
            script.tool_calls.append(_Recorded(key, entry))
    return script
