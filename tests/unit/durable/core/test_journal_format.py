"""
The journal's storage format, pinned by journals the code that writes them recorded.

``golden/format_8`` holds what ``golden/record.py`` recorded with ``run_durably_sync`` for each
scenario of ``golden/scenarios.py``, ``golden/format_7`` to ``golden/format_2`` what the
releases before recorded (format 3 added the part digests that name what changed, format 4 stores
for a later model call of a run only the digests of the input items it added, format 5 keeps when
a call in flight started, format 6 a model call's input and output tokens and cost, format 7 the policy of a call in
flight, format 8 stores the same in fewer bytes); each is replayed
here by the next try of that scenario. The hand-written ``golden/format_1`` is what release 0.1.0
wrote: this release sets it aside.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from agents import Agent, function_tool
from agents.testing import ScriptedModel, function_call
from airflow.providers.common.compat.sdk import AirflowTaskTimeout
from durable_backends import FakeTaskStateStore
from golden.scenarios import CHART, FERNET_KEY, INVOICE, LEDGER, SCENARIOS, SCENARIOS_BY_NAME, Try

from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage
from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.segments import KeyedSegments, SegmentedStorage
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

GOLDEN = Path(__file__).parents[1] / "golden"
FORMAT_1 = GOLDEN / "format_1"
FORMAT_2 = GOLDEN / "format_2"
FORMAT_3 = GOLDEN / "format_3"
FORMAT_4 = GOLDEN / "format_4"
FORMAT_5 = GOLDEN / "format_5"
FORMAT_6 = GOLDEN / "format_6"
FORMAT_7 = GOLDEN / "format_7"
FORMAT_8 = GOLDEN / "format_8"
#: Every format this release replays, each with its golden journals.
REPLAYED_FORMATS = [FORMAT_2, FORMAT_3, FORMAT_4, FORMAT_5, FORMAT_6, FORMAT_7, FORMAT_8]
RECORDER = GOLDEN / "record.py"

SCENARIO_NAMES = [scenario.name for scenario in SCENARIOS]

# The idempotency key of the call at 1.2 of a journal in InMemoryStorage: a tool that deduplicates
# by it must see the same key on a retry that a newer release runs.
IDEMPOTENCY_KEY_AT_1_2 = "durable-34809866d1e388d437e8c06d801b8304"

# The entries each replay writes over (a mark replaced by the result the call now has) and adds.
REWRITTEN = {
    "plain": set(),
    "structured_tool_outputs": set(),
    "nested_run": {"1.2"},
    "in_flight": {"1.2"},
    "discarded": {"1.3"},
}
ADDED = {
    "plain": set(),
    "structured_tool_outputs": set(),
    "nested_run": {"1.3"},
    "in_flight": {"1.3"},
    "discarded": set(),
}


@pytest.fixture
def golden_key(monkeypatch):
    """The ``[core] fernet_key`` the golden journals were fingerprinted with."""
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", FERNET_KEY)


def golden_entries(directory: Path) -> dict[str, str]:
    return {path.stem: path.read_text(encoding="utf-8") for path in directory.glob("*.json")}


def storage_of(entries: dict[str, str]) -> InMemoryStorage:
    storage = InMemoryStorage()
    storage.entries.update(entries)
    return storage


@pytest.fixture(params=REPLAYED_FORMATS, ids=lambda directory: directory.name)
def golden(request):
    """The golden directory of one format this release replays."""
    return request.param


def replayed(name: str, golden: Path = FORMAT_6) -> Try:
    return SCENARIOS_BY_NAME[name].replay(storage_of(golden_entries(golden / name)))


def identity(text: str) -> tuple[object, ...]:
    entry = json.loads(text)
    return entry["kind"], entry["name"], entry["fingerprint"], entry["follows"]


def stored_identity(text: str) -> tuple[object, ...]:
    """:func:`identity` as format 8 stores it: the first 128 bits of the fingerprint's digest and of ``follows``."""
    kind, name, fingerprint, follows = identity(text)
    key, _, digest = fingerprint.rpartition(":")
    return kind, name, f"{key}:{digest[:32]}", follows[:32]


# Formats 2 and 3, recorded by run_durably_sync


def test_the_recorder_writes_the_checked_in_golden_files_byte_for_byte(tmp_path):
    # Run as by hand, in a process of its own: its own hash seed, configuration and key cache.
    recording = subprocess.run(
        [sys.executable, str(RECORDER), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert recording.returncode == 0, recording.stderr[-3000:]

    def files(root: Path) -> dict[str, bytes]:
        return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*.json"))}

    assert files(tmp_path) == files(GOLDEN / f"format_{FORMAT_VERSION}"), (
        "this code writes journals other than the checked-in golden ones: the stored format changed; "
        "bump FORMAT_VERSION and record a new golden directory (see golden/record.py), never rewrite one"
    )


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_each_golden_journal_holds_the_states_its_scenario_is_about(name, golden):
    entries = {key: json.loads(text) for key, text in golden_entries(golden / name).items()}
    states = {key: entry.get("state", entry["kind"]) for key, entry in entries.items()}
    assert states == SCENARIOS_BY_NAME[name].states
    assert {entry["format"] for entry in entries.values()} == {int(golden.name.removeprefix("format_"))}


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_format_3_holds_the_fingerprints_of_format_2_and_part_digests_beside_them(name):
    format_2, format_3 = golden_entries(FORMAT_2 / name), golden_entries(FORMAT_3 / name)
    assert set(format_2) == set(format_3)
    for key in set(format_3) - {"0"}:
        assert identity(format_3[key]) == identity(format_2[key])
        assert "parts" in json.loads(format_3[key])
        assert "parts" not in json.loads(format_2[key])


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_format_4_holds_the_fingerprints_of_format_3_and_for_a_later_model_call_only_the_items_it_added(name):
    format_3, format_4 = golden_entries(FORMAT_3 / name), golden_entries(FORMAT_4 / name)
    assert set(format_3) == set(format_4)
    for key in set(format_4) - {"0"}:
        assert identity(format_4[key]) == identity(format_3[key])
        parts_3, parts_4 = json.loads(format_3[key])["parts"], json.loads(format_4[key])["parts"]
        if "input" not in parts_3 or key.endswith(".1"):  # a tool call, or the first call of its run
            assert parts_4 == parts_3
            continue
        # The run's call before this one sent the input up to item "from": only the rest is stored.
        start = parts_4["input"]["from"]
        assert parts_4["input"]["added"] == parts_3["input"][start:]
        assert 0 < start < len(parts_3["input"])
        assert {**parts_4, "input": None} == {**parts_3, "input": None}


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_format_5_is_format_4_with_when_a_call_in_flight_started(name):
    format_4, format_5 = golden_entries(FORMAT_4 / name), golden_entries(FORMAT_5 / name)
    assert set(format_4) == set(format_5)
    for key in set(format_5) - {"0"}:
        entry_4, entry_5 = json.loads(format_4[key]), json.loads(format_5[key])
        if entry_5["state"] == "in_flight":
            assert entry_5.pop("meta") == {"started": "2026-01-01T00:00:00+00:00"}
        assert {**entry_5, "format": 4} == entry_4


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_format_6_is_format_5_with_the_input_and_output_tokens_of_each_model_call(name):
    format_5, format_6 = golden_entries(FORMAT_5 / name), golden_entries(FORMAT_6 / name)
    assert set(format_5) == set(format_6)
    for key in set(format_6) - {"0"}:
        entry_5, entry_6 = json.loads(format_5[key]), json.loads(format_6[key])
        if entry_6["kind"] == "model" and entry_6["state"] == "done":
            tokens = entry_6["meta"].pop("input_tokens") + entry_6["meta"].pop("output_tokens")
            assert tokens == entry_6["meta"]["tokens"]  # the scripted model's price is unknown: no cost_usd
        assert {**entry_6, "format": 5} == entry_5


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_format_7_is_format_6_with_the_policy_of_each_call_in_flight(name):
    format_6, format_7 = golden_entries(FORMAT_6 / name), golden_entries(FORMAT_7 / name)
    assert set(format_6) == set(format_7)
    for key in set(format_7) - {"0"}:
        entry_6, entry_7 = json.loads(format_6[key]), json.loads(format_7[key])
        if entry_7["state"] == "in_flight":
            assert entry_7["meta"].pop("policy") == "rerun"
        assert {**entry_7, "format": 6} == entry_6


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_format_8_is_format_7_stored_shorter(name):
    """
    The fingerprint and ``follows`` cut to 128 bits; a model call's parts but the input left out
    where its run's model call before had them the same; no empty ``meta``; a model answer without
    its usage or its empty optional fields.
    """
    format_7, format_8 = golden_entries(FORMAT_7 / name), golden_entries(FORMAT_8 / name)
    assert set(format_7) == set(format_8)
    before: dict[str, dict] = {}
    left_out = 0
    for key in sorted(set(format_8) - {"0"}, key=lambda key: [int(number) for number in key.split(".")]):
        entry_7, entry_8 = json.loads(format_7[key]), json.loads(format_8[key])
        assert stored_identity(format_8[key]) == identity(format_8[key]) == stored_identity(format_7[key])
        for field in ("fingerprint", "follows"):
            entry_7.pop(field), entry_8.pop(field)
        if entry_7.get("meta") == {}:
            del entry_7["meta"]
        if entry_7["kind"] == "model":
            run, parts_7 = key.rpartition(".")[0], entry_7["parts"]
            if run in before:
                entry_7["parts"] = {part: v for part, v in parts_7.items() if part == "input" or before[run][part] != v}
                left_out += len(parts_7) - len(entry_7["parts"])
            before[run] = parts_7
            if isinstance(entry_7.get("result"), dict):
                del entry_7["result"]["usage"]
                for field in ("request_id", "raw_usage"):
                    if entry_7["result"][field] is None:
                        del entry_7["result"][field]
        assert {**entry_8, "format": 7} == entry_7, key
    if name == "plain":
        assert left_out == 7  # the model, instructions, settings, tools, output schema, handoffs, prompt


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_a_replay_computes_the_fingerprints_the_golden_journal_holds(name, golden, golden_key, caplog):
    entries = golden_entries(golden / name)
    storage = storage_of(entries)
    with caplog.at_level(logging.WARNING):
        SCENARIOS_BY_NAME[name].replay(storage)

    assert "run diverged" not in caplog.text
    assert "no recorded run starts with this call" not in caplog.text
    rewritten = {key for key, text in entries.items() if storage.entries[key] != text}
    assert rewritten == REWRITTEN[name]
    assert set(storage.entries) - set(entries) == ADDED[name]
    # A call run again asks what it asked when its mark was written, and now holds its result.
    for key in rewritten:
        assert stored_identity(storage.entries[key]) == stored_identity(entries[key])
        assert json.loads(storage.entries[key])["state"] == "done"
        assert json.loads(storage.entries[key])["format"] == FORMAT_VERSION


@pytest.mark.parametrize("name", ["nested_run", "in_flight"])
def test_a_journal_a_replay_wrote_into_in_this_format_beside_an_older_one_replays_whole(name, golden, golden_key):
    # The replay writes format 8 entries among the golden ones (a call run again, the calls after
    # it): the try after it reads both formats in one run and runs nothing live.
    storage = storage_of(golden_entries(golden / name))
    SCENARIOS_BY_NAME[name].replay(storage)
    formats = {json.loads(text)["format"] for key, text in storage.entries.items() if key != "0"}
    assert FORMAT_VERSION in formats

    again = SCENARIOS_BY_NAME[name].replay(storage)

    assert (again.model_calls, again.tool_runs) == ({}, {})
    assert again.journal.stats.ran_live == {}


def test_a_plain_run_replays_every_call_with_no_live_call(golden, golden_key):
    attempt = replayed("plain", golden)

    assert (attempt.model_calls, attempt.tool_runs) == ({}, {})
    assert attempt.journal.stats.replayed == {"model": 2, "tool": 1}
    assert attempt.journal.stats.ran_live == {}
    assert attempt.journal.stats.tokens_saved == 240
    assert attempt.tool_outputs == ["sunny in Paris"]
    assert attempt.result.final_output == "Sunny in Paris."


def test_structured_tool_outputs_replay_as_equal_values_of_the_same_types(golden, golden_key):
    attempt = replayed("structured_tool_outputs", golden)

    assert (attempt.model_calls, attempt.tool_runs) == ({}, {})
    assert attempt.journal.stats.replayed == {"model": 2, "tool": 3}
    outputs = attempt.tool_outputs
    assert outputs == [INVOICE, LEDGER, CHART]
    # The same types all the way down: an Invoice, a tuple that stays a tuple, an int key, the
    # Decimal with its digits, bytes, the SDK's image.
    assert repr(outputs) == repr([INVOICE, LEDGER, CHART])
    assert attempt.result.final_output == "Invoice INV-7 is due on 2026-12-31."


def test_a_nested_run_replays_under_the_tool_that_started_it_when_that_tool_runs_again(golden, golden_key):
    attempt = replayed("nested_run", golden)

    # The tool failed after its nested run completed: it runs again, its helper is not asked again.
    assert attempt.tool_runs == {"delegate": 1}
    assert attempt.model_calls == {"boss": 1}
    assert attempt.nested_outputs == ["backups: all green."]
    assert attempt.journal.stats.replayed == {"model": 2}
    assert attempt.journal.stats.ran_live == {"tool": 1, "model": 1}
    assert attempt.result.final_output == "Backups: all green."


def test_an_in_flight_tool_call_runs_again_once_with_its_idempotency_key(golden, golden_key, caplog):
    with caplog.at_level(logging.WARNING):
        attempt = replayed("in_flight", golden)

    assert attempt.tool_runs == {"send_mail": 1}
    assert attempt.idempotency_keys == [IDEMPOTENCY_KEY_AT_1_2]
    assert "an earlier try started and never finished" in caplog.text
    assert f"idempotency_key={IDEMPOTENCY_KEY_AT_1_2}" in caplog.text
    # The answer that asked for the mail replays; the one after the mail is asked for the first time.
    assert attempt.model_calls == {"mailer": 1}
    assert attempt.journal.stats.replayed == {"model": 1}
    assert attempt.journal.stats.ran_live == {"tool": 1, "model": 1}
    assert attempt.result.final_output == "Sent to ops@example.com."


def test_a_discarded_answer_is_asked_again_once_after_the_calls_before_it_replay(golden, golden_key):
    attempt = replayed("discarded", golden)

    assert attempt.model_calls == {"assistant": 1}
    assert attempt.tool_runs == {}
    assert attempt.journal.stats.replayed == {"model": 1, "tool": 1}
    assert attempt.journal.stats.ran_live == {"model": 1}
    # Asked with the replayed tool output, as the recording asked it.
    assert attempt.models["assistant"].calls[0].input[-1]["output"] == "sunny in Paris"
    assert attempt.result.final_output == "Sunny in Paris; Oslo I did not get to."


def test_a_golden_journal_replayed_under_another_fernet_key_runs_live_naming_the_key(monkeypatch, caplog):
    # Pins that the recorded fingerprints are keyed: without the recording's key nothing matches.
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", FERNET_KEY[::-1])
    with caplog.at_level(logging.WARNING):
        attempt = replayed("plain")
    assert attempt.model_calls == {"assistant": 2}
    assert "fingerprinted with another key" in caplog.text


def test_a_tool_call_cut_off_by_the_task_timeout_keeps_its_in_flight_mark(golden_key):
    @function_tool
    def send_mail(to: str) -> str:
        """Sends the report by e-mail."""
        raise AirflowTaskTimeout("Timeout, PID: 1")  # as the task runner's alarm raises it mid-call

    storage = InMemoryStorage()
    scripted = ScriptedModel([[function_call("send_mail", {"to": "ops@example.com"}, call_id="call_mail")]])
    with journal_scope(DurableJournal(storage)), pytest.raises(AirflowTaskTimeout):
        run_durably_sync(Agent(name="mailer", model=scripted, tools=[send_mail]), "Mail the report.")
    assert json.loads(storage.entries["1.2"])["state"] == "in_flight"


# Format 1, hand-written for release 0.1.0

CALLS = [
    ("model", "gpt-4o", {"input": ["What is the weather in Paris?"]}),
    ("tool", "weather", {"arguments": '{"city": "Paris"}', "call_id": "call_1"}),
    ("model", "gpt-4o", {"input": ["What is the weather in Paris?", "call_1", "cloudy"]}),
]


def golden_storage() -> InMemoryStorage:
    return storage_of(golden_entries(FORMAT_1))


def test_a_journal_written_in_format_1_is_set_aside_with_a_log_line_and_runs_live(caplog):
    # Format 2 changed what a fingerprint is (keyed) and what a run's number means (its first call).
    journal = DurableJournal(golden_storage())
    with caplog.at_level(logging.WARNING), journal.run() as run:
        steps = [run.claim(kind, name, fingerprint(request)) for kind, name, request in CALLS]
    assert [step.replayed for step in steps] == [False, False, False]
    assert "has format 1 (an earlier release wrote it), this release reads formats 2, 3, 4" in caplog.text


def test_a_journal_written_in_format_1_is_deleted_with_the_rest():
    storage = golden_storage()
    DurableJournal(storage).delete()
    assert storage.entries == {}


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_a_golden_journal_an_older_release_stored_one_entry_a_key_replays_through_segments_and_is_deleted(
    name, golden, golden_key
):
    # As the releases before segments left it in a worker's task state store, and read by this one.
    accessor = FakeTaskStateStore()
    entries = TaskStateStoreStorage(accessor, identity="dag/run/agent/-1")
    for key, text in golden_entries(golden / name).items():
        entries.write(key, text)
    in_memory = SCENARIOS_BY_NAME[name].replay(storage_of(golden_entries(golden / name)))
    attempt = SCENARIOS_BY_NAME[name].replay(SegmentedStorage(KeyedSegments(entries)))

    assert (attempt.model_calls, attempt.tool_runs) == (in_memory.model_calls, in_memory.tool_runs)
    assert attempt.journal.stats.replayed == in_memory.journal.stats.replayed
    assert attempt.result.final_output == in_memory.result.final_output
    attempt.journal.delete()
    assert accessor.rows == {}
