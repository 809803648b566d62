from __future__ import annotations

import datetime
import enum
import logging
import os
import subprocess
import sys
from dataclasses import dataclass

import pydantic

from airflow.providers.common.ai.durable.core import fingerprint as fingerprint_module
from airflow.providers.common.ai.durable.core.fingerprint import canonical_json, fingerprint

REQUEST = {
    "model": "gpt-4o",
    "tools": {"weather", "search", "mail"},
    "settings": {"temperature": 0.2, "tool_choice": None},
    "input": [("user", "hello"), ("assistant", "hi")],
}


def test_a_fingerprint_does_not_depend_on_dict_order():
    reordered = dict(reversed(list(REQUEST.items())))
    assert fingerprint(reordered) == fingerprint(REQUEST)


def test_a_fingerprint_is_the_same_in_every_process_whatever_the_hash_seed(monkeypatch):
    # The module alone, by its file, under the Airflow host; the key comes from Airflow's
    # configuration, as in each worker.
    fernet_key = "2Qx1Tj2qMmbnT0Xy0rX3V7n9N2y0aHc8qGkS1Xz1b9Q="
    code = (
        "import importlib.util as u, sys;"
        "import airflow.providers.common.ai.durable.airflow;"
        f"spec = u.spec_from_file_location('fingerprint', {fingerprint_module.__file__!r});"
        "m = u.module_from_spec(spec); spec.loader.exec_module(m);"
        "print(m.fingerprint({'tools': {'weather', 'search', 'mail', 'calendar', 'sql'}, 'n': (1, 2)}))"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed, "AIRFLOW__CORE__FERNET_KEY": fernet_key},
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]  # Airflow may log its configuration first
        for seed in ("1", "2", "3")
    }
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", fernet_key)
    expected = fingerprint({"tools": {"sql", "calendar", "mail", "search", "weather"}, "n": [1, 2]})
    assert digests == {expected}


def test_any_change_in_what_is_asked_changes_the_fingerprint():
    changed = {**REQUEST, "settings": {"temperature": 0.3, "tool_choice": None}}
    assert fingerprint(changed) != fingerprint(REQUEST)


def test_enums_dates_dataclasses_and_pydantic_models_render_by_their_values():
    class Colour(enum.Enum):
        RED = "red"

    @dataclass
    class Settings:
        when: datetime.date
        colour: Colour

    class Schema(pydantic.BaseModel):
        name: str

    rendered = canonical_json({"s": Settings(datetime.date(2026, 11, 29), Colour.RED), "m": Schema(name="x")})
    assert rendered == '{"m":{"name":"x"},"s":{"colour":"red","when":"2026-11-29"}}'


def test_a_value_that_cannot_be_rendered_reliably_gives_no_fingerprint_and_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert fingerprint({"callback": lambda: None}, what="tool 'x'") is None
        assert fingerprint({1: "a", "b": 2}) is None  # keys that cannot be sorted
    assert "cannot fingerprint tool 'x'" in caplog.text
