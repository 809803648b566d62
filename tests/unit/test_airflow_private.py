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
