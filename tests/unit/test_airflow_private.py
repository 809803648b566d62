from __future__ import annotations

import importlib


def test_the_private_airflow_names_the_provider_uses_still_exist():
    from airflow import __version__

    try:
        importlib.import_module("airflow.providers.common.ai._airflow_private")
    except ImportError as error:
        raise AssertionError(
            f"Airflow {__version__} no longer has a private name the provider uses ({error}); "
            "see src/airflow/providers/common/ai/_airflow_private.py for why each is needed"
        ) from error


def test_a_task_run_by_dag_test_or_outside_a_worker_is_not_run_by_an_executor():
    from airflow.providers.common.ai._airflow_private import is_run_by_an_executor
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

    assert is_run_by_an_executor() is False
    if AIRFLOW_V_3_0_PLUS:
        # A worker's supervisor talks to it through a CommsDecoder on task_runner.SUPERVISOR_COMMS.
        from airflow.sdk.execution_time import task_runner
        from airflow.sdk.execution_time.comms import CommsDecoder

        assert "SUPERVISOR_COMMS" in task_runner.__annotations__
        assert isinstance(CommsDecoder, type)
