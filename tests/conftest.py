"""Test settings shared by every test.

The environment is set at import time, before anything imports Airflow: Airflow reads its
configuration once, when it is first imported.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

# A throwaway Airflow home, so that tests never read or write a developer's own Airflow.
if "AIRFLOW_HOME" not in os.environ:
    _airflow_home = tempfile.mkdtemp(prefix="common-ai-tests-airflow-home-")
    os.environ["AIRFLOW_HOME"] = _airflow_home
else:
    _airflow_home = None

# Unit test mode lets a test call an operator's execute() outside the task runner and keeps
# Airflow from writing an airflow.cfg into the Airflow home.
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

_SYSTEM_TESTS = Path(__file__).parent / "system"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "db: the test needs the Airflow metadata database (tests/system/ always gets it)"
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    if _airflow_home is not None:
        shutil.rmtree(_airflow_home, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """Create the Airflow metadata database once per session, in the test Airflow home."""
    from airflow.utils.db import initdb

    initdb()


@pytest.fixture(autouse=True)
def _airflow_db_for_tests_that_need_it(request: pytest.FixtureRequest) -> None:
    # Unit tests do not pay for the database: only system tests and tests marked `db` do.
    if request.node.get_closest_marker("db") or Path(request.node.path).is_relative_to(_SYSTEM_TESTS):
        request.getfixturevalue("airflow_db")
