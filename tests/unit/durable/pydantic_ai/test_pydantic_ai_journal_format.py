"""
The journal's storage format as the Pydantic AI adapter writes it, pinned by golden journals:
``golden/pydantic_ai_runs/format_8`` holds what ``golden/record.py --pydantic-ai`` recorded for each
scenario of ``golden/pydantic_ai_scenarios.py`` (a plain run with a tool, a streamed run cut off in
its second answer, a tool that asked for an approval), ``format_7`` what the release before
recorded; each is replayed here by its next try.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# A module of the real package: without Pydantic AI, "pydantic_ai" alone would import this test folder
# as a namespace package (the durable tests' conftest puts tests/unit/durable on sys.path).
pytest.importorskip(
    "pydantic_ai.models.openai", reason="Pydantic AI is the optional extra [pydantic-ai], not installed here"
)

from golden.pydantic_ai_scenarios import SCENARIOS, SCENARIOS_BY_NAME, Try
from golden.scenarios import FERNET_KEY
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from airflow.providers.common.ai.durable.core.approvals import APPROVAL_STEP
from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.pydantic_ai._requests import described_request

GOLDEN = Path(__file__).parents[1] / "golden"
PYDANTIC_AI_GOLDEN = GOLDEN / "pydantic_ai_runs" / f"format_{FORMAT_VERSION}"
#: Every format of the Pydantic AI adapter's golden journals this release replays.
REPLAYED_FORMATS = [GOLDEN / "pydantic_ai_runs" / "format_7", PYDANTIC_AI_GOLDEN]
RECORDER = GOLDEN / "record.py"
#: The pydantic-ai-slim the golden journals were recorded with: the one the 3.3 line's test venv pins.
RECORDED_WITH = re.search(
    r"^pydantic-ai-slim\[openai\]==(\S+)$",
    (Path(__file__).parents[4] / "constraints" / "packages-3.3.txt").read_text(encoding="utf-8"),
    re.MULTILINE,
)[1]


@pytest.fixture(params=REPLAYED_FORMATS, ids=lambda directory: directory.name)
def golden(request) -> Path:
    """The golden directory of one format this release replays."""
    return request.param


@pytest.fixture(autouse=True)
def golden_key(monkeypatch):
    """The ``[core] fernet_key`` the golden journals were fingerprinted with."""
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", FERNET_KEY)


def golden_entries(name: str, golden: Path = PYDANTIC_AI_GOLDEN) -> dict[str, str]:
    return {path.stem: path.read_text(encoding="utf-8") for path in (golden / name).glob("*.json")}


def replayed(name: str, golden: Path) -> list[Try]:
    """The tries that replay scenario ``name``'s golden journal of the format ``golden`` holds."""
    storage = InMemoryStorage()
    storage.entries.update(golden_entries(name, golden))
    return SCENARIOS_BY_NAME[name].replay(storage)


def test_the_recorder_writes_the_checked_in_pydantic_ai_golden_files_byte_for_byte(tmp_path):
    installed = importlib.metadata.version("pydantic-ai-slim")
    if installed != RECORDED_WITH:
        # Installed without constraints, as scripts/sdk_combinations.sh does: the replays below run.
        pytest.skip(
            f"the golden journals are what pydantic-ai-slim {RECORDED_WITH} writes; {installed} dumps its "
            "answers otherwise (fields it added, each answer's duration)"
        )
    # Run as by hand, in a process of its own: its own hash seed, configuration and key cache.
    recording = subprocess.run(
        [sys.executable, str(RECORDER), "--pydantic-ai", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert recording.returncode == 0, recording.stderr[-3000:]

    def files(root: Path) -> dict[str, bytes]:
        return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*.json"))}

    assert files(tmp_path) == files(PYDANTIC_AI_GOLDEN), (
        "the Pydantic AI adapter writes journals other than the checked-in golden ones: the stored format "
        "changed (or what Pydantic AI dumps of its messages); bump FORMAT_VERSION and record a new golden "
        "directory (see golden/record.py), never rewrite one"
    )


@pytest.mark.parametrize("name", [scenario.name for scenario in SCENARIOS])
def test_each_pydantic_ai_golden_journal_holds_the_steps_its_scenario_is_about(name, golden):
    entries = {key: json.loads(text) for key, text in golden_entries(name, golden).items()}
    assert {key: (entry["kind"], entry["state"]) for key, entry in entries.items()} == SCENARIOS_BY_NAME[name].entries
    assert {entry["format"] for entry in entries.values()} == {int(golden.name.removeprefix("format_"))}
    # A model call's tokens, recorded with its answer (the scripted model has no price, so no cost).
    for entry in (entry for entry in entries.values() if entry["kind"] == "model"):
        meta = entry["meta"]
        assert set(meta) == {"tokens", "input_tokens", "output_tokens"}
        assert meta["tokens"] == meta["input_tokens"] + meta["output_tokens"] > 0


def test_a_plain_pydantic_ai_run_replays_every_request_and_tool_call(golden):
    [retry] = replayed("plain", golden)

    assert (retry.model_requests, retry.tool_runs) == (0, {})
    assert retry.output == "Sunny in Paris."
    assert retry.journal.stats.replayed == {"model": 2, "tool": 1}


def test_a_streamed_pydantic_ai_run_streams_the_recorded_answer_and_asks_the_cut_off_one_again(golden):
    [retry] = replayed("streamed", golden)

    assert (retry.model_requests, retry.tool_runs) == (1, {})
    assert retry.output == "Sunny in Paris."
    assert retry.journal.stats.replayed == {"model": 1, "tool": 1}
    # The recorded answer streams whole from the journal: its tool call starts and ends, no deltas.
    first_answer = [event for event in retry.events if isinstance(event, (PartStartEvent, PartEndEvent))][:2]
    assert [type(event) for event in first_answer] == [PartStartEvent, PartEndEvent]
    assert all(isinstance(event.part, ToolCallPart) for event in first_answer)
    assert isinstance(retry.events[-1], PartEndEvent) and retry.events[-1].part == TextPart("Sunny in Paris.")


def test_a_tool_that_asked_for_an_approval_is_asked_nothing_again_and_runs_once_approved(golden):
    waiting, resumed = replayed("asked_for_approval", golden)

    # The next try finds the request asked and waits for its answer: nothing is sent, nothing runs.
    assert (waiting.model_requests, waiting.tool_runs) == (0, {})
    assert waiting.journal.stats.replayed == {"model": 1, "tool": 1}
    # Resumed with the approval: the call that asked replays, the approved call runs once.
    assert (resumed.model_requests, resumed.tool_runs) == (1, {"pay": 1})
    assert resumed.output == "Paid 50."
    assert resumed.journal.stats.replayed == {"model": 1, "tool": 1}
    assert resumed.journal.stats.approvals == ["pay approved by alice"]
    assert APPROVAL_STEP in {json.loads(text)["kind"] for text in golden_entries("asked_for_approval", golden).values()}


@dataclasses.dataclass(repr=False, kw_only=True)
class ToolDefinitionOfALaterRelease(ToolDefinition):
    """A tool definition with the fields Pydantic AI added after 2.68, which never reach the model."""

    durable: bool | None = None
    ui_visibility: str | None = None


def test_a_tool_definitions_fields_that_never_reach_the_model_leave_the_request_the_same():
    # A journal written before a Pydantic AI upgrade (2.68: no such fields) replays after it (2.78).
    history = [ModelRequest(parts=[UserPromptPart("Weather in Paris?")])]
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    before = ToolDefinition(name="weather", parameters_json_schema=schema, description="The weather.")
    after = ToolDefinitionOfALaterRelease(
        name="weather", parameters_json_schema=schema, description="The weather.", durable=False, ui_visibility="hidden"
    )

    def described(tool: ToolDefinition) -> dict:
        return described_request("m", history, None, ModelRequestParameters(function_tools=[tool]))

    assert described(after) == described(before)
    assert described(after)["tools"][0]["description"] == "The weather."


@pytest.mark.skipif(
    "ui_visibility" not in {field.name for field in dataclasses.fields(ToolCallPart)},
    reason=f"pydantic-ai-slim {importlib.metadata.version('pydantic-ai-slim')} has no ui_visibility on tool parts",
)
def test_a_tool_parts_ui_visibility_leaves_the_request_the_same():
    def described(visibility: str | None) -> dict:
        call = ToolCallPart("weather", {"city": "Paris"}, "call_1", ui_visibility=visibility)
        returned = ToolReturnPart("weather", "Sunny", "call_1", ui_visibility=visibility)
        history = [
            ModelRequest(parts=[UserPromptPart("Weather in Paris?")]),
            ModelResponse(parts=[call]),
            ModelRequest(parts=[returned]),
        ]
        return described_request("m", history, None, ModelRequestParameters())

    assert described("hidden") == described(None)
    assert described(None)["input"][2]["parts"][0]["content"] == "Sunny"
