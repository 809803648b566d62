"""The offline replay of a journal file: every step from the file, or the first divergence named."""

from __future__ import annotations

import json

import pytest
from agents import Agent, Model, ModelProvider, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.journal_file import export_document, read_journal_file
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
from airflow.providers.common.ai.testing.replay import replay_offline

INSTRUCTIONS = "Triage the ticket: say its team and urgency."
TICKET = {"T-5": "I was charged twice"}


class _Named(ScriptedModel):
    """A scripted model with the name a provider's model has."""

    model = "gpt-4.1-mini"


class _Provider(ModelProvider):
    def __init__(self, model: Model) -> None:
        self.model = model

    def get_model(self, model_name):
        return self.model


def _agent(runs: list[str], instructions: str = INSTRUCTIONS) -> Agent:
    @function_tool
    def lookup_ticket(ticket_id: str) -> str:
        """The ticket's text."""
        runs.append(ticket_id)
        return TICKET[ticket_id]

    return Agent(name="triage", model="gpt-4.1-mini", instructions=instructions, tools=[lookup_ticket])


def _script() -> list:
    return [
        [function_call("lookup_ticket", {"ticket_id": "T-5"}, call_id="call_1")],
        [assistant_message("Billing, urgent.")],
    ]


@pytest.fixture
def journal_file(tmp_path):
    """A run recorded in a journal and exported, as airflow common-ai journal export writes it."""
    storage = InMemoryStorage("triage_dag/run_1/triage/-1")
    runs: list[str] = []
    with journal_scope(DurableJournal(storage)):
        result = run_durably_sync(
            _agent(runs), "Triage ticket T-5.", run_config=RunConfig(model_provider=_Provider(_Named(_script())))
        )
    assert (result.final_output, runs) == ("Billing, urgent.", ["T-5"])
    document = export_document(
        storage.entries,
        task_instance={"dag_id": "triage_dag", "run_id": "run_1", "task_id": "triage", "map_index": -1},
        source="journal",
        exported_at="2026-01-01T00:00:00+00:00",
    )
    path = tmp_path / "triage.json"
    path.write_text(json.dumps(document))
    return path


def test_a_recorded_run_replays_every_step_offline_without_running_its_tool(journal_file):
    runs: list[str] = []

    replay = replay_offline(_agent(runs), "Triage ticket T-5.", journal_file)

    assert replay.result is not None and replay.result.final_output == "Billing, urgent."
    assert replay.replayed == ["1.1", "1.2", "1.3"]
    assert replay.replayed_everything and replay.divergence is None
    assert runs == []


def test_changed_instructions_stop_a_strict_replay_at_the_first_call_naming_the_instructions(journal_file):
    runs: list[str] = []

    replay = replay_offline(_agent(runs, "Triage the ticket in one word."), "Triage ticket T-5.", journal_file)

    assert replay.stopped and replay.result is None
    # The first call matches no recorded run, so the run takes a new number: its first call is the divergence.
    assert replay.divergence is not None and replay.live == [replay.divergence.key] == ["2.1"]
    assert "the instructions changed" in replay.divergence.reason
    assert replay.replayed == [] and runs == []


def test_a_lenient_replay_hands_the_call_that_diverged_and_the_rest_to_the_tests_model(journal_file):
    runs: list[str] = []
    model = ScriptedModel(_script())

    replay = replay_offline(
        _agent(runs, "Triage the ticket in one word."), "Triage ticket T-5.", journal_file, strict=False, model=model
    )

    assert replay.result is not None and replay.result.final_output == "Billing, urgent."
    assert replay.live == ["2.1", "2.2", "2.3"] and replay.divergence.key == "2.1"
    assert len(model.calls) == 2 and runs == ["T-5"]


def test_a_different_tool_argument_stops_a_strict_replay_before_the_tool_runs(tmp_path, journal_file):
    document = json.loads(journal_file.read_text())
    runs: list[str] = []
    # The recorded answer asks for another ticket: the tool call the run makes is not the recorded one.
    first = document["steps"][0]["entry"]["result"]
    first["output"][0]["arguments"] = json.dumps({"ticket_id": "T-6"})
    TICKET["T-6"] = "Where is my parcel?"
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(document))

    replay = replay_offline(_agent(runs), "Triage ticket T-5.", changed)

    assert replay.stopped and replay.divergence.key == "1.2"
    assert "argument" in replay.divergence.reason and "ticket_id" in replay.divergence.reason
    assert runs == []


def test_a_replay_needs_a_model_when_it_is_not_strict(journal_file):
    with pytest.raises(ValueError, match="needs a model="):
        replay_offline(_agent([]), "Triage ticket T-5.", journal_file, strict=False)


def test_a_journal_file_names_the_fingerprint_key_and_is_read_back(journal_file):
    read = read_journal_file(journal_file.read_text())
    assert [key for key, _ in read.steps] == ["1.1", "1.2", "1.3"]
    assert read.task_instance["task_id"] == "triage"
