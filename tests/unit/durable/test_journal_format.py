"""The journal's storage format, pinned by a journal that release 0.1.0 wrote (format 1)."""

from __future__ import annotations

import logging
from pathlib import Path

from airflow.providers.common.ai.durable.fingerprint import fingerprint
from airflow.providers.common.ai.durable.journal import DurableJournal
from airflow.providers.common.ai.durable.storage import InMemoryStorage

GOLDEN = Path(__file__).parent / "golden" / "format_1"

CALLS = [
    ("model", "gpt-4o", {"input": ["What is the weather in Paris?"]}),
    ("tool", "weather", {"arguments": '{"city": "Paris"}', "call_id": "call_1"}),
    ("model", "gpt-4o", {"input": ["What is the weather in Paris?", "call_1", "cloudy"]}),
]


def golden_storage() -> InMemoryStorage:
    storage = InMemoryStorage()
    for path in GOLDEN.glob("*.json"):
        storage.entries[path.stem] = path.read_text()
    return storage


def test_a_journal_written_in_format_1_is_set_aside_with_a_log_line_and_runs_live(caplog):
    # Format 2 changed what a fingerprint is (keyed) and what a run's number means (its first call).
    journal = DurableJournal(golden_storage())
    with caplog.at_level(logging.WARNING), journal.run() as run:
        steps = [run.claim(kind, name, fingerprint(request)) for kind, name, request in CALLS]
    assert [step.replayed for step in steps] == [False, False, False]
    assert "has format 1 (an earlier release wrote it), this release reads 2" in caplog.text


def test_a_journal_written_in_format_1_is_deleted_with_the_rest():
    storage = golden_storage()
    DurableJournal(storage).delete()
    assert storage.entries == {}
