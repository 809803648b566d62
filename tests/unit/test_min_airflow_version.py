"""The package refuses, at import, an Airflow line it cannot run on, with the reason (R-55)."""

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


def _refused(reload_with, version: str) -> str:
    with pytest.raises(RuntimeError) as refused:
        reload_with(version)
    message = str(refused.value)
    assert message.startswith(
        f"The package `apache-airflow-providers-common-ai:{package.__version__}` cannot run on Apache Airflow "
        f"{version}: "
    )
    assert message.endswith("It supports Airflow 2.11, 3.1.1+, 3.2 and 3.3+; install one of those.")
    return message


@pytest.mark.parametrize("version", ["2.10.5", "2.10.0b1", "1.10.15"])
def test_an_airflow_older_than_2_11_is_refused_naming_the_minimum(reload_with, version):
    assert "it needs Apache Airflow 2.11.0+" in _refused(reload_with, version)


@pytest.mark.parametrize("version", ["3.0.0", "3.0.6", "3.1.0", "3.1.0+astro.1", "3.1.0rc2"])
def test_airflow_3_0_and_3_1_0_are_refused_with_the_reason(reload_with, version):
    message = _refused(reload_with, version)
    assert "it sets no cap on fastapi" in message
    assert "HTTP 422" in message


# A pre-release counts as its base version, as Airflow's own providers count it.
@pytest.mark.parametrize(
    "version",
    ["2.11.0", "2.11.0b1", "2.11.2", "3.1.1", "3.1.8", "3.2.0", "3.2.0b1", "3.2.2", "3.3.2", "3.4.0b2", "4.0.0"],
)
def test_a_supported_airflow_imports(reload_with, version):
    assert reload_with(version).MIN_AIRFLOW_VERSION == "2.11.0"
