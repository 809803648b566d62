from __future__ import annotations

from pathlib import Path

import yaml

from airflow.providers.common.ai import __version__
from airflow.providers.common.ai.get_provider_info import get_provider_info

PROVIDER_YAML = Path(__file__).parents[2] / "provider.yaml"


def test_get_provider_info_says_what_provider_yaml_says():
    assert get_provider_info() == yaml.safe_load(PROVIDER_YAML.read_text())


def test_the_provider_version_is_the_package_version():
    assert get_provider_info()["versions"][0] == __version__


def test_airflow_finds_the_provider_through_its_entry_point():
    from airflow.providers_manager import ProvidersManager

    providers = ProvidersManager().providers

    assert providers["apache-airflow-providers-common-ai"].version == __version__


def test_durable_cache_path_is_an_airflow_option_that_defaults_to_empty():
    from airflow.configuration import conf

    assert conf.get("common.ai", "durable_cache_path") == ""
