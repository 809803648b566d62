"""The host of the journal core: registered by the ``durable`` package, built on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow.providers.common.ai.durable.core import host as host_module
from airflow.providers.common.ai.durable.core.host import PLAIN_HOST, Host, current_host, hosting, use_by_default

_BINDING = "airflow.providers.common.ai.durable.airflow.binding"

_PROBE = f"""
import json, sys
import airflow.providers.common.ai.durable.core.journal
import airflow.providers.common.ai.durable.core.budget
import airflow.providers.common.ai.durable.core.encryption
before = sorted(name for name in sys.modules if name.startswith("airflow.providers.common.ai.durable.airflow"))
from airflow.providers.common.ai.durable.core.host import current_host
host = current_host()
from {_BINDING} import AIRFLOW_HOST
print(json.dumps({{"before": before, "is_airflow_host": host is AIRFLOW_HOST}}))
"""


def test_importing_the_core_runs_nothing_of_the_binding_and_the_first_lookup_builds_the_airflow_host():
    found = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    seen = json.loads(found.stdout.strip().splitlines()[-1])
    assert seen == {"before": [], "is_airflow_host": True}


@pytest.fixture
def no_default(monkeypatch):
    monkeypatch.setattr(host_module, "_default", [])


def test_a_registered_function_is_called_once_on_first_use_and_its_host_kept(no_default):
    built = []
    mine = Host(failing_error=KeyError)

    def build():
        built.append(1)
        return mine

    use_by_default(build)
    assert built == []
    assert current_host() is mine
    assert current_host() is mine
    assert built == [1]
    with hosting(PLAIN_HOST):
        assert current_host() is PLAIN_HOST


def test_without_a_default_the_plain_host_answers_and_a_second_other_default_is_refused(no_default):
    assert current_host() is PLAIN_HOST
    mine = Host()
    use_by_default(mine)
    use_by_default(mine)
    with pytest.raises(ValueError, match="already has a default host"):
        use_by_default(Host(failing_error=KeyError))
