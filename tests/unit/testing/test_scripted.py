"""A journal file as an agents.testing.ScriptedModel script and tool stubs, each answered by the request."""

from __future__ import annotations

import pytest
from agents import Agent, Runner, function_tool
from test_journal_file_golden import CURRENT, FERNET_KEY, GOLDEN, PROMPT, lookup_ticket, secret_known_to_the_masker

from airflow.providers.common.ai.durable.core.journal_file import read_journal_file
from airflow.providers.common.ai.testing.scripted import ScriptMiss, scripted_from_file

FILE = CURRENT
INSTRUCTIONS = "Triage the ticket."


def triage(recorded, instructions: str = INSTRUCTIONS, tool=lookup_ticket) -> Agent:
    return Agent(name="triage", model=recorded.model, instructions=instructions, tools=[recorded.stubbed(tool)])


@pytest.fixture(autouse=True)
def _secret():
    # The prompt holds it: the recorded digests are of its masked form.
    secret_known_to_the_masker()


@pytest.fixture
def ran(monkeypatch):
    """The tool's runs: the stub must never run it."""
    runs: list[str] = []
    monkeypatch.setattr(lookup_ticket, "on_invoke_tool", _counting(lookup_ticket.on_invoke_tool, runs))
    return runs


def _counting(invoke, runs):
    async def counted(context, arguments):
        runs.append(arguments)
        return await invoke(context, arguments)

    return counted


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("journal_file_v*.json")), ids=lambda path: path.stem)
def test_the_recorded_run_replays_on_the_scripted_model_and_the_stub_without_the_tool(ran, path):
    recorded = scripted_from_file(path, fernet_key=FERNET_KEY)

    result = Runner.run_sync(triage(recorded), PROMPT)

    # Each answer reports the tokens it used when it was recorded (format 8: from the entry's meta).
    steps = read_journal_file(path.read_text(encoding="utf-8"), name=path.name).steps
    recorded_tokens = sum(entry["meta"]["tokens"] for _, entry in steps if entry["kind"] == "model")
    usage = result.context_wrapper.usage
    assert (usage.requests, usage.total_tokens) == (2, recorded_tokens)

    assert result.final_output == "Billing, urgent."
    assert recorded.answered == ["1.1", "1.2", "1.3"]
    assert ran == []
    recorded.assert_complete()
    # The model the SDK's users know: its calls are there to assert on.
    assert [call.system_instructions for call in recorded.model.calls] == [INSTRUCTIONS, INSTRUCTIONS]


def test_a_changed_instruction_is_a_miss_naming_the_recorded_call_and_what_differs():
    recorded = scripted_from_file(FILE, fernet_key=FERNET_KEY)

    with pytest.raises(ScriptMiss) as miss:
        Runner.run_sync(triage(recorded, "Triage the ticket in one word."), PROMPT)

    assert str(miss.value) == (
        "model call 1 of the run is no recorded call: it was expected to be model 'gpt-4.1-mini' at 1.1, and it "
        "asks something other than the recorded call: the instructions changed"
    )


def test_a_changed_message_is_a_miss_naming_the_first_message_that_differs():
    recorded = scripted_from_file(FILE, fernet_key=FERNET_KEY)

    with pytest.raises(ScriptMiss) as miss:
        Runner.run_sync(triage(recorded), "Triage ticket T-6.")

    assert "expected to be model 'gpt-4.1-mini' at 1.1" in str(miss.value)
    assert "input item 0 differs" in str(miss.value), str(miss.value)


def test_a_tool_called_with_other_arguments_is_a_miss_naming_its_recorded_calls(ran):
    recorded = scripted_from_file(FILE, fernet_key=FERNET_KEY)
    stub = recorded.stubbed(lookup_ticket)

    import asyncio

    with pytest.raises(ScriptMiss) as miss:
        asyncio.run(stub.on_invoke_tool(None, '{"ticket_id": "T-6"}'))
    assert str(miss.value) == (
        "tool 'lookup_ticket' was called with arguments no unused recorded call of it had: "
        '{"ticket_id": "T-6"} (its recorded calls: 1.2)'
    )
    assert ran == []


def test_a_tool_stub_keeps_the_tool_the_model_was_told_of():
    recorded = scripted_from_file(FILE, fernet_key=FERNET_KEY)

    @function_tool
    def lookup_ticket(ticket_id: str, verbose: bool = False) -> str:  # another schema: the request differs
        """The ticket's text."""
        return ""

    with pytest.raises(ScriptMiss, match="tool 'lookup_ticket' changed"):
        Runner.run_sync(triage(recorded, tool=lookup_ticket), PROMPT)


def test_a_file_fingerprinted_under_another_key_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"fingerprinted under 'hmac-sha256:.*give replay_offline\(fernet_key"):
        scripted_from_file(FILE)
