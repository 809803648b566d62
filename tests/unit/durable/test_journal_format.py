"""The journal's storage format, pinned by a journal that release 0.1.0 wrote (format 1)."""

from __future__ import annotations

import json
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


def test_a_journal_written_in_format_1_still_replays_every_step():
    journal = DurableJournal(golden_storage())
    with journal.run() as run:
        steps = [run.claim(kind, name, fingerprint(request)) for kind, name, request in CALLS]
    assert [step.replayed for step in steps] == [True, True, True]
    assert steps[1].result == {"temperature_c": 11, "sky": "cloudy"}
    assert journal.stats.tokens_saved == 42 + 57


def test_entries_are_still_written_with_the_fields_of_format_1():
    storage = InMemoryStorage()
    with DurableJournal(storage).run() as run:
        for kind, name, request in CALLS:
            run.claim(kind, name, fingerprint(request)).record("x")
    for key, text in storage.entries.items():
        golden = json.loads((GOLDEN / f"{key}.json").read_text())
        written = json.loads(text)
        assert written.keys() == golden.keys()
        assert {k: written[k] for k in ("format", "kind", "name", "fingerprint", "follows", "state")} == {
            k: golden[k] for k in ("format", "kind", "name", "fingerprint", "follows", "state")
        }
