"""
Journal entries encrypted at rest with ``[core] fernet_key`` (R-47): what the store holds, key
rotation, and journals that cannot be decrypted.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import pytest
import tries
from agents import Agent, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.exceptions import AirflowConfigException
from cryptography.fernet import Fernet
from durable_backends import (
    FakeTaskStateStore,
    assert_fernet_tokens_only,
    make_storage,
    records_in_folder,
    records_in_store,
)

from airflow.providers.common.ai.durable.core.encryption import (
    EncryptedStorage,
    UndecryptableTextError,
    decrypt_text,
    encrypt_text,
)
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint, recorded_form

KEY_OLD = Fernet.generate_key().decode()
KEY_NEW = Fernet.generate_key().decode()
FORECAST = "Zürich: 23 °C, föhn ☀ — forecast #4711"
PROMPT = "Wie ist das Wetter in Zürich?"


class Weather:
    """A task whose agent calls one tool; the tool counts its real runs."""

    def __init__(self, storage) -> None:
        self.task = tries.Task(storage)
        self.task.prompt = PROMPT
        self.runs: Counter[str] = Counter()

        @function_tool
        def forecast(city: str) -> str:
            """The forecast for a city."""
            self.runs[city] += 1
            return FORECAST

        self.forecast = forecast

    def agent(self, *steps) -> Agent:
        return Agent(name="weather", model=ScriptedModel(list(steps)), tools=[self.forecast])

    def first_try_dies_after_the_tool(self) -> None:
        """The tool ran and was recorded; the model then failed."""
        call = [function_call("forecast", {"city": "Zürich"}, call_id="c1")]
        self.task.failing_attempt(self.agent(call, RuntimeError("model outage")), RuntimeError)

    def retry(self) -> str:
        call = [function_call("forecast", {"city": "Zürich"}, call_id="c1")]
        return self.task.attempt(self.agent(call, [assistant_message("Sunny.")])).final_output


def raw_texts(backend: str, storage, tmp_path) -> list[tuple[str, str]]:
    """What the backend's own place holds, read past the journal and the encryption: every record of its segments."""
    if backend == "memory":
        return list(storage.entries.items())
    if backend == "file":
        return records_in_folder(tmp_path)
    return records_in_store(storage.place.legacy._accessor)


@pytest.mark.parametrize("backend", ["memory", "file", "task-state-store"])
def test_with_a_fernet_key_the_store_holds_no_plain_text_and_a_retry_replays_it(fernet_key, backend, tmp_path):
    fernet_key(KEY_NEW)
    inner = make_storage(backend, tmp_path, FakeTaskStateStore())
    weather = Weather(EncryptedStorage(inner))
    weather.first_try_dies_after_the_tool()

    stored = raw_texts(backend, inner, tmp_path)
    # The model's answer and the tool's output.
    assert {key for key, _ in stored} == {"1.1", "1.2"}
    # Each is one Fernet token and nothing beside it (a token's base64 holds "4711" now and then,
    # so the digits are not looked for inside it): superseded ones (a start mark, an in-flight mark) too.
    assert_fernet_tokens_only(stored, ("Zürich", "Z\\u00fcrich", "forecast", "fingerprint", "weather", "state", "{"))

    assert weather.retry() == "Sunny."
    assert weather.runs == {"Zürich": 1}
    assert weather.task.replayed == {"model": 1, "tool": 1}


def test_without_a_fernet_key_entries_are_stored_as_plain_json_as_before(fernet_key):
    fernet_key("")
    inner = make_storage("memory", None)
    weather = Weather(EncryptedStorage(inner))
    weather.first_try_dies_after_the_tool()

    assert json.loads(inner.entries["1.2"])["result"] == {"value": FORECAST}
    assert weather.retry() == "Sunny."
    assert weather.runs == {"Zürich": 1}


def test_a_journal_whose_key_was_removed_runs_live_naming_the_cause_and_is_still_deleted(fernet_key, caplog):
    fernet_key(KEY_OLD)
    inner = make_storage("memory", None)
    weather = Weather(EncryptedStorage(inner))
    weather.first_try_dies_after_the_tool()
    written_under_the_old_key = set(inner.entries)

    fernet_key(KEY_NEW)
    weather.task.storage = EncryptedStorage(inner)
    with caplog.at_level(logging.WARNING):
        assert weather.retry() == "Sunny."
    assert weather.runs == {"Zürich": 2}
    assert weather.task.replayed == {}
    assert "cannot be decrypted" in caplog.text and "removed or changed" in caplog.text

    # The entries it could not read are set aside, not overwritten, and clean-up still finds them.
    assert written_under_the_old_key < set(inner.entries)
    weather.task.journal.finish(succeeded=True)
    assert inner.entries == {}


@pytest.mark.parametrize(
    ("recorded_with", "read_with", "cause"),
    [
        (KEY_OLD, "", "this worker has no [core] fernet_key"),
        ("", KEY_OLD, "stored unencrypted while [core] fernet_key is set"),
    ],
    ids=["encrypted-read-without-a-key", "plain-read-with-a-key"],
)
def test_a_journal_written_with_a_key_and_read_without_one_or_the_reverse_runs_live(
    fernet_key, caplog, recorded_with, read_with, cause
):
    fernet_key(recorded_with)
    inner = make_storage("memory", None)
    weather = Weather(EncryptedStorage(inner))
    weather.first_try_dies_after_the_tool()

    fernet_key(read_with)
    weather.task.storage = EncryptedStorage(inner)
    with caplog.at_level(logging.WARNING):
        assert weather.retry() == "Sunny."
    assert weather.runs == {"Zürich": 2}
    assert cause in caplog.text


def test_an_entry_altered_in_the_store_is_not_replayed(fernet_key, caplog):
    fernet_key(KEY_NEW)
    inner = make_storage("memory", None)
    weather = Weather(EncryptedStorage(inner))
    weather.first_try_dies_after_the_tool()
    token = inner.entries["1.2"]
    inner.entries["1.2"] = token[:-8] + ("A" if token[-8] != "A" else "B") + token[-7:]

    weather.task.storage = EncryptedStorage(inner)
    with caplog.at_level(logging.WARNING):
        assert weather.retry() == "Sunny."
    assert weather.runs == {"Zürich": 2}
    assert weather.task.replayed == {"model": 1}
    assert "cannot be decrypted" in caplog.text


def test_after_a_rotation_new_entries_are_encrypted_with_the_new_key(fernet_key):
    fernet_key(f"{KEY_NEW},{KEY_OLD}")
    inner = make_storage("memory", None)
    EncryptedStorage(inner).write("1.1", '{"x": 1}')
    assert Fernet(KEY_NEW.encode()).decrypt(inner.entries["1.1"].removeprefix("fernet:").encode()) == b'{"x": 1}'


def test_a_new_key_put_in_front_of_the_old_one_still_replays_a_journal_recorded_under_the_old_one(fernet_key):
    fernet_key(KEY_OLD)
    inner = make_storage("memory", None)
    weather = Weather(EncryptedStorage(inner))
    weather.first_try_dies_after_the_tool()

    # Airflow's rotation: the new key first, the old one after it, until nothing uses the old one.
    fernet_key(f"{KEY_NEW},{KEY_OLD}")
    weather.task.storage = EncryptedStorage(inner)
    assert weather.retry() == "Sunny."
    assert weather.runs == {"Zürich": 1}
    assert weather.task.replayed == {"model": 1, "tool": 1}


def test_a_fingerprint_under_a_new_key_knows_the_one_recorded_under_the_key_it_replaced(fernet_key):
    fernet_key(KEY_OLD)
    recorded = fingerprint({"input": "hello"})
    fernet_key(f"{KEY_NEW},{KEY_OLD}")
    current = fingerprint({"input": "hello"})
    assert current != recorded
    assert recorded_form(recorded, current) == recorded
    assert recorded_form(current, current) == current
    assert recorded_form(recorded, fingerprint({"input": "hello!"})) is None
    fernet_key(KEY_NEW)  # the old key removed: nothing recorded under it matches any more
    assert recorded_form(recorded, fingerprint({"input": "hello"})) is None


@pytest.mark.parametrize(
    "text",
    ["", "\ud800 a lone surrogate", "\U0001d518\U0001d52b ☃ \u202e rtl \x00 nul", "x" * 5_000_000],
    ids=["empty", "lone-surrogate", "odd-unicode", "5-MB"],
)
def test_encrypted_text_reads_back_as_it_was(fernet_key, text):
    fernet_key(KEY_NEW)
    stored = encrypt_text(text)
    assert stored.startswith("fernet:") and (not text or text[:20] not in stored)
    assert decrypt_text(stored) == text


def test_encrypted_text_under_a_rotated_key_reads_back_and_under_a_removed_one_says_why(fernet_key):
    fernet_key(KEY_OLD)
    stored = encrypt_text("summary of try 1")
    fernet_key(f"{KEY_NEW},{KEY_OLD}")
    assert decrypt_text(stored) == "summary of try 1"
    newest = Fernet.generate_key().decode()
    fernet_key(f"{newest},{KEY_NEW},{KEY_OLD}")  # a second rotation before the oldest key went
    assert decrypt_text(stored) == "summary of try 1"
    assert decrypt_text(encrypt_text("summary of try 2")) == "summary of try 2"
    fernet_key(f"{newest},{KEY_NEW}")
    with pytest.raises(UndecryptableTextError, match="removed or changed"):
        decrypt_text(stored)


def test_a_fernet_key_that_is_not_one_is_refused_naming_the_option(fernet_key):
    fernet_key("not-a-fernet-key")
    with pytest.raises(AirflowConfigException, match=r"\[core\] fernet_key is not a list of Fernet keys"):
        EncryptedStorage(make_storage("memory", None))


def test_a_budget_written_under_a_replaced_key_fails_its_retries_and_a_clear_starts_a_new_one_naming_what_it_set_aside(
    fernet_key, caplog
):
    from agents.testing import ModelStep

    from airflow.providers.common.ai.durable.core.budget import BUDGET_KEY, BudgetUnreadable
    from airflow.providers.common.ai.durable.core.host import current_host
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.scope import journal_scope
    from airflow.providers.common.ai.durable.core.usage import durable_usage
    from airflow.providers.common.ai.durable.openai_agents import UsageBudget, run_durably_sync

    inner = make_storage("memory", None)
    budget = UsageBudget(max_requests=5)

    def try_of(number: int, first_try: int, *steps) -> tuple[DurableJournal, ScriptedModel]:
        journal = DurableJournal(
            EncryptedStorage(inner), host=current_host().for_try(number, budget_first_try=first_try)
        )
        return journal, ScriptedModel(list(steps))

    fernet_key(KEY_OLD)
    journal, model = try_of(1, 1, ModelStep.raise_error(ConnectionError("down")))
    with journal_scope(journal), pytest.raises(ConnectionError):
        run_durably_sync(Agent(name="a", model=model), "Weather?", budget=budget)
    assert BUDGET_KEY in inner.entries

    fernet_key(KEY_NEW)
    # A retry of the same budget cannot tell what its tries spent: no request is sent.
    journal, model = try_of(2, 1, [assistant_message("Sunny.")])
    with journal_scope(journal), pytest.raises(BudgetUnreadable, match="cannot be decrypted"):
        run_durably_sync(Agent(name="a", model=model), "Weather?", budget=budget)
    assert len(model.calls) == 0

    # After a clear, a new budget: the old one is set aside, said so, and replaced.
    journal, model = try_of(3, 3, ModelStep.raise_error(ConnectionError("down again")))
    with caplog.at_level(logging.WARNING), journal_scope(journal), pytest.raises(ConnectionError):
        run_durably_sync(Agent(name="a", model=model), "Weather?", budget=budget)
    assert len(model.calls) == 1
    assert "what the tries before try 3 spent" in caplog.text and "set aside" in caplog.text
    assert "cannot be decrypted" in caplog.text

    # The next try of the new budget reads what try 3 spent.
    journal, model = try_of(4, 3, [assistant_message("Sunny.")])
    with journal_scope(journal):
        run_durably_sync(Agent(name="a", model=model), "Weather?", budget=budget)
        usage = durable_usage()
    assert usage is not None and usage.budget is not None
    assert (usage.budget["first_try"], usage.budget["spent"]) == (3, {"requests": 2})
