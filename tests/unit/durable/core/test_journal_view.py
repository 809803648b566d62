"""What the journal page shows of a stored journal: runs, steps, nested runs, states, sizes, tokens, and nothing recorded."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.fernet import Fernet

from airflow.providers.common.ai.durable.core.journal_view import as_json, journal_view

GOLDEN = Path(__file__).parents[1] / "golden"


def golden(name: str, fmt: int = 3) -> dict[str, str]:
    return {path.stem: path.read_text(encoding="utf-8") for path in (GOLDEN / f"format_{fmt}" / name).glob("*.json")}


def rows(runs: list[dict], depth: int = 0) -> list[tuple]:
    return [
        row
        for run in runs
        for step in run["steps"]
        for row in [
            (depth, run["run"], step["key"], step["kind"], step["state"], step["tokens"]),
            *rows(step["runs"], depth + 1),
        ]
    ]


def test_a_nested_run_shows_under_the_step_that_started_it_in_position_order():
    assert rows(as_json(journal_view(golden("nested_run")))) == [
        (0, "1", "1.1", "model", "recorded", 120),
        (0, "1", "1.2", "tool", "failed", None),
        (1, "1.2.1", "1.2.1.1", "model", "recorded", 120),
    ]


def test_every_state_is_named_and_each_size_is_the_entrys_bytes():
    states = {
        name: [row[4] for row in rows(as_json(journal_view(golden(name, fmt))))]
        for name, fmt in (("in_flight", 3), ("discarded", 2))
    }
    assert states == {
        "in_flight": ["recorded", "in flight"],
        "discarded": ["recorded", "recorded", "discarded", "recorded"],
    }
    entries = golden("plain")
    [run] = journal_view(entries)
    assert [step.size for step in run.steps] == [len(entries[key].encode()) for key in ("1.1", "1.2", "1.3")]


def test_positions_order_as_numbers_not_as_text():
    entries = {f"1.{n}": json.dumps({"kind": "tool", "name": f"t{n}", "state": "done"}) for n in range(1, 12)}
    [run] = journal_view(entries)
    assert [step.position for step in run.steps] == list(range(1, 12))


def test_an_encrypted_journal_reads_with_the_key_and_a_broken_entry_says_it_cannot_be_read(monkeypatch):
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    from airflow.providers.common.ai.durable.core.encryption import encrypt_text

    entries = {key: encrypt_text(text) for key, text in golden("plain").items()}
    entries["1.4"] = "fernet:garbage"
    states = [step.state for step in journal_view(entries)[0].steps]
    assert states == ["recorded", "recorded", "recorded", "cannot be read"]


def test_the_view_holds_no_recorded_result_or_request():
    shown = json.dumps(as_json(journal_view(golden("plain"))))
    assert "Paris" not in shown and "sunny" not in shown and "hmac-sha256" not in shown


def test_a_run_s_snapshot_is_not_shown_as_a_run():
    entries = golden("plain")
    with_snapshot = {**entries, "0.1": json.dumps({"format": 3, "kind": "snapshot", "entries": entries})}
    assert as_json(journal_view(with_snapshot)) == as_json(journal_view(entries))


def test_keys_and_entries_no_release_writes_show_as_what_they_are_and_the_view_stays_sendable():
    deep = ".".join(["2", *["1"] * 79])  # run 2, a run nested 40 steps deep
    entries = {
        "1.1": json.dumps({"kind": ["model"], "name": "\ud800" + "n" * 10_000, "state": "s" * 10_000}),
        "1.\u00b2": json.dumps({"kind": "tool", "name": "superscript two", "state": "done"}),
        f"1.{'9' * 5000}": json.dumps({"kind": "tool", "name": "long position", "state": "done"}),
        "1.2": json.dumps({"kind": "tool", "name": "deep", "state": "done", "meta": {"tokens": True}}),
        "1.3": "[" * 100_000 + "]" * 100_000,
        "1.4": "",
        **{
            ".".join(deep.split(".")[:n]): json.dumps({"kind": "tool", "name": "x", "state": "done"})
            for n in range(2, 81, 2)
        },
    }
    view = as_json(journal_view(entries))
    json.dumps(view, ensure_ascii=False).encode("utf-8")  # what a response body must be
    by_key = {step["key"]: step for run in view for step in run["steps"]}
    odd = by_key["1.1"]
    assert (odd["kind"], odd["name"][:7], len(odd["name"]) < 300, len(odd["state"]) < 300) == (
        "?",
        "\\ud800n",
        True,
        True,
    )
    shown = {step["name"]: step for step in by_key.values()}
    assert shown["superscript two"]["position"] == shown["long position"]["position"] == 0
    assert shown["deep"]["tokens"] is None
    assert [step["state"] for run in view for step in run["steps"] if step["name"] == "?"] == ["cannot be read"] * 2

    def depth(runs: list[dict]) -> int:
        return max((1 + depth(step["runs"]) for run in runs for step in run["steps"]), default=0)

    assert depth(view) <= 17


def test_a_call_found_in_flight_shows_how_it_was_resolved_or_that_a_person_was_asked():
    def entry(state: str, meta: dict) -> str:
        return json.dumps({"format": 5, "kind": "tool", "name": "refund", "state": state, "meta": meta})

    entries = {
        "1.2": entry("done", {"in_flight": "verify: it happened"}),
        "1.4": entry("in_flight", {"started": "2026-12-01T10:00:00+00:00", "asked": True}),
        "1.6": entry("in_flight", {"started": "2026-12-01T10:00:00+00:00"}),
        "1.8": entry("done", {"in_flight": ["not", "a", "text"]}),
    }
    shown = {step["key"]: step["in_flight"] for run in as_json(journal_view(entries)) for step in run["steps"]}
    assert shown == {
        "1.2": "verify: it happened",
        "1.4": "a person was asked whether it took effect; no answer recorded yet",
        "1.6": None,
        "1.8": "?",
    }
