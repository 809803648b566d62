"""
The journal file's schema, pinned by golden files written by the code:
``golden/journal_file_v<N>_format_<F>.json`` is what ``export_document`` and ``journal_file_text``
(the CLI's export, the page's download) write for one recorded run, byte for byte, in schema
version N, its entries as the journal stores them in entry format F (``journal_file_v1.json``:
format 7). ``UPDATE_GOLDEN=1`` writes the current version's file (a new version's or entry
format's only: a file of a released version is never rewritten; bump ``journal_file.VERSION`` when
the file's own fields change). Files this release cannot use (truncated, of
another schema or version, of another task) are refused naming what to do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agents import Agent, Model, ModelProvider, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.journal_file import (
    SCHEMA,
    VERSION,
    JournalFileError,
    check_fork_point,
    export_document,
    journal_file_text,
    read_journal_file,
)
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.testing.replay import fingerprinted_with

GOLDEN = Path(__file__).parent / "golden"
#: The golden file this release writes: its schema version, its entries' format.
CURRENT = GOLDEN / f"journal_file_v{VERSION}_format_{FORMAT_VERSION}.json"
#: A fixed [core] fernet_key: the fingerprints in the file are keyed by it.
FERNET_KEY = "dGhlIGdvbGRlbiBqb3VybmFsIGZpbGVzIGtleS4uLi4="
#: A secret the masker knows (a connection's password, say): masked where it shows, as the journal records.
SECRET = "hunter2-golden-connection-password"
#: What the run was asked: with the secret, which the file holds only as masked digests.
PROMPT = f"Triage ticket T-5 (my card's PIN is {SECRET})."
TASK = {"dag_id": "triage_dag", "run_id": "manual__2026-01-01", "task_id": "triage", "map_index": -1}


class _Named(ScriptedModel):
    model = "gpt-4.1-mini"


class _Provider(ModelProvider):
    def __init__(self, model: Model) -> None:
        self.model = model

    def get_model(self, model_name):
        return self.model


@function_tool
def lookup_ticket(ticket_id: str) -> str:
    """The ticket's text."""
    return f"{ticket_id}: I was charged twice é😀"


def secret_known_to_the_masker() -> None:
    """SECRET, told to the masker as Airflow tells it a connection's password: masked before it is digested."""
    from airflow.providers.common.compat.sdk import mask_secret

    mask_secret(SECRET)


def recorded_file() -> str:
    """The journal file of one recorded run (a tool call and two answers), as export writes it."""
    secret_known_to_the_masker()
    storage = InMemoryStorage("triage_dag/manual__2026-01-01/triage/-1")
    script = [
        [function_call("lookup_ticket", {"ticket_id": "T-5"}, call_id="call_1")],
        [assistant_message("Billing, urgent.")],
    ]
    agent = Agent(name="triage", model="gpt-4.1-mini", instructions="Triage the ticket.", tools=[lookup_ticket])
    with journal_scope(DurableJournal(storage)):
        run_durably_sync(agent, PROMPT, run_config=RunConfig(model_provider=_Provider(_Named(script))))
    document = export_document(
        storage.entries, task_instance=TASK, source="journal", exported_at="2026-01-01T00:00:00+00:00"
    )
    return journal_file_text(document)


@pytest.fixture
def golden_key():
    with fingerprinted_with(FERNET_KEY):
        yield


def test_the_export_writes_the_golden_file_of_its_schema_version_byte_for_byte(golden_key):
    path = CURRENT
    written = recorded_file()
    assert written == recorded_file()  # deterministic: the same run writes the same bytes
    if os.environ.get("UPDATE_GOLDEN") == "1" and not path.exists():
        path.write_text(written, encoding="utf-8")
    assert path.exists(), f"no golden file of version {VERSION}: run this test with UPDATE_GOLDEN=1"
    assert written == path.read_text(encoding="utf-8"), (
        f"export writes other files than {path.name}: the journal file's schema changed; bump "
        "journal_file.VERSION (and read the old versions; or the entries' FORMAT_VERSION), then write the new "
        "golden file with UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("journal_file_v*.json")), ids=lambda path: path.stem)
def test_every_golden_file_is_read_back_with_its_steps(path):
    journal = read_journal_file(path.read_text(encoding="utf-8"), name=path.name, dag_id="triage_dag", task_id="triage")
    assert [key for key, _ in journal.steps] == ["1.1", "1.2", "1.3"]
    assert [entry["kind"] for _, entry in journal.steps] == ["model", "tool", "model"]
    assert journal.task_instance == TASK
    # Secrets stay masked as recorded: the password never reaches the file.
    assert SECRET not in path.read_text(encoding="utf-8")


def golden_text() -> str:
    return CURRENT.read_text(encoding="utf-8")


@pytest.mark.parametrize("cut", [1, 100, 0.5, -2])
def test_a_truncated_file_is_refused_naming_that_it_may_be_truncated(cut):
    text = golden_text()
    at = int(len(text) * cut) if isinstance(cut, float) else cut
    with pytest.raises(JournalFileError, match=r"^fixture\.json is not complete JSON .*it may be truncated: export"):
        read_journal_file(text[:at], name="fixture.json")


def test_a_file_of_another_schema_is_refused_naming_both():
    document = json.loads(golden_text()) | {"schema": "langgraph/checkpoint"}
    with pytest.raises(JournalFileError) as refused:
        read_journal_file(json.dumps(document), name="fixture.json")
    assert str(refused.value) == (
        f"fixture.json is not a journal file (its schema is 'langgraph/checkpoint', not {SCHEMA!r}): export it "
        "again with: airflow common-ai journal export DAG_ID TASK_ID RUN_ID -o FILE"
    )
    with pytest.raises(JournalFileError, match="its schema is 'list'"):
        read_journal_file("[1, 2]", name="fixture.json")


@pytest.mark.parametrize("version", [VERSION + 1, 0, "1", None])
def test_a_file_of_another_version_is_refused_naming_the_versions_this_release_reads(version):
    document = json.loads(golden_text()) | {"version": version}
    with pytest.raises(JournalFileError) as refused:
        read_journal_file(json.dumps(document), name="fixture.json")
    assert str(refused.value) == (
        f"fixture.json is a journal file of version {version!r}, and this release reads version 1: "
        "export it with this release"
    )


@pytest.mark.parametrize(("field", "value"), [("task_id", "another_task"), ("dag_id", "another_dag")])
def test_a_file_of_another_task_given_to_a_fork_is_refused(field, value):
    document = json.loads(golden_text())
    document["task_instance"][field] = value
    with pytest.raises(JournalFileError) as refused:
        read_journal_file(json.dumps(document), name="fixture.json", dag_id="triage_dag", task_id="triage")
    wanted = TASK[field]
    assert str(refused.value) == (
        f"fixture.json is the journal of {field} {value!r}, not of {wanted!r}: a journal only replays in the task "
        "that recorded it; export that task's journal"
    )


def test_a_step_of_an_entry_format_this_release_does_not_read_is_refused_naming_it():
    document = json.loads(golden_text())
    document["steps"][1]["entry"]["format"] = 99
    with pytest.raises(JournalFileError, match=r"step 1\.2 has entry format 99, which this release does not read"):
        read_journal_file(json.dumps(document), name="fixture.json")
    document["steps"][1] = {"key": "1.2"}
    with pytest.raises(JournalFileError, match="step 2 has no key or no entry"):
        read_journal_file(json.dumps(document), name="fixture.json")


def test_a_fork_point_that_is_no_step_of_the_file_is_refused():
    journal = read_journal_file(golden_text())
    check_fork_point(journal, 3)
    with pytest.raises(JournalFileError, match="step 4 is not a step of this journal: fork at a step from 0 to 3"):
        check_fork_point(journal, 4)
