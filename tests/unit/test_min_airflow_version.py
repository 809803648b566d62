"""The package refuses, at import, an Airflow older than the versions it supports (3.2+)."""

from __future__ import annotations

import importlib

import pytest

import airflow
import airflow.providers.common.ai as package


@pytest.fixture
def reload_with(monkeypatch):
    def reload(version: str):
        monkeypatch.setattr(airflow, "__version__", version)
        return importlib.reload(package)

    yield reload
    monkeypatch.undo()
    importlib.reload(package)  # the module as the installed Airflow leaves it


@pytest.mark.parametrize("version", ["3.1.9", "3.1.0+astro.1", "3.0.6", "2.11.0"])
def test_an_older_airflow_is_refused_naming_the_supported_versions(reload_with, version):
    with pytest.raises(RuntimeError) as refused:
        reload_with(version)
    assert str(refused.value) == (
        f"The package `apache-airflow-providers-common-ai:{package.__version__}` needs Apache Airflow "
        f"3.2.0+ (it supports Airflow 3.2 and 3.3), not {version}"
    )


# A pre-release of 3.2.0 counts as 3.2.0 (its base version), as Airflow's own providers count it.
@pytest.mark.parametrize("version", ["3.2.0", "3.2.0b1", "3.2.0.dev0", "3.2.2", "3.3.2", "3.4.0.dev0", "4.0.0"])
def test_a_supported_airflow_imports(reload_with, version):
    assert reload_with(version).MIN_AIRFLOW_VERSION == "3.2.0"
