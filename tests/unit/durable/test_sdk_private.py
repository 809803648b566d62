"""The OpenAI Agents SDK's private names the adapter relies on are all still there (see _sdk_private)."""

from __future__ import annotations

from importlib.metadata import version

import agents

from airflow.providers.common.ai.durable import _sdk_private
from airflow.providers.common.ai.durable._sdk_private import missing_private_names


def test_every_private_name_of_the_sdk_the_adapter_uses_exists_in_the_installed_version():
    missing = missing_private_names()
    assert not missing, (
        f"openai-agents {version('openai-agents')} no longer has {', '.join(missing)}, which "
        "airflow.providers.common.ai.durable._sdk_private relies on: find the new way and update that module"
    )


def test_the_check_names_a_private_name_an_upgrade_removed(monkeypatch):
    import agents.run_internal.run_loop

    monkeypatch.delattr(agents.Model, _sdk_private.CLEANUP_ON_RUN_END)
    monkeypatch.delattr(agents.run_internal.run_loop, "get_model")
    assert set(missing_private_names()) == {_sdk_private.CLEANUP_ON_RUN_END, "agents.run_internal.run_loop.get_model"}
