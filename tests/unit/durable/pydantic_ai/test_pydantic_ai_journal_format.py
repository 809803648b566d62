"""
The journal's storage format as the Pydantic AI adapter writes it, pinned by golden journals:
``golden/pydantic_ai_runs/format_8`` holds what ``golden/record.py --pydantic-ai`` recorded for each
scenario of ``golden/pydantic_ai_scenarios.py`` (a plain run with a tool, a streamed run cut off in
its second answer, a tool that asked for an approval), ``format_7`` what the release before
recorded; each is replayed here by its next try.
"""

from __future__ import annotations

import json
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
from pydantic_ai.messages import PartEndEvent, PartStartEvent, TextPart, ToolCallPart

from airflow.providers.common.ai.durable.core.approvals import APPROVAL_STEP
from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage

GOLDEN = Path(__file__).parents[1] / "golden"
PYDANTIC_AI_GOLDEN = GOLDEN / "pydantic_ai_runs" / f"format_{FORMAT_VERSION}"
#: Every format of the Pydantic AI adapter's golden journals this release replays.
REPLAYED_FORMATS = [GOLDEN / "pydantic_ai_runs" / "format_7", PYDANTIC_AI_GOLDEN]
RECORDER = GOLDEN / "record.py"


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
