"""Airflow version flags for this provider.

Version differences live here and only here, in the style of Airflow's own providers.
Prefer a feature check at run time (``context.get("task_state_store")``) over these flags
where one is possible.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    from packaging.version import Version

    from airflow import __version__

    airflow_version = Version(__version__)
    return airflow_version.major, airflow_version.minor, airflow_version.micro


AIRFLOW_V_3_0_PLUS: bool = get_base_airflow_version_tuple() >= (3, 0, 0)
#: Human-in-the-loop (approvals) arrived in 3.1; of the lines this provider supports, 3.2 is the first with it.
AIRFLOW_V_3_2_PLUS: bool = get_base_airflow_version_tuple() >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS: bool = get_base_airflow_version_tuple() >= (3, 3, 0)
AIRFLOW_V_3_4_PLUS: bool = get_base_airflow_version_tuple() >= (3, 4, 0)

if AIRFLOW_V_3_3_PLUS:
    from airflow.sdk.execution_time.context import NEVER_EXPIRE
else:
    # The task state store arrived in 3.3; this is the same object it compares a retention with.
    NEVER_EXPIRE = timedelta.max


def task_state_store_rows_of(model: Any, map_index: int) -> list[Any]:
    """
    The conditions that pick, in the task state store's table ``model``, the rows of the task
    instance at ``map_index`` (its ``dag_id``, ``run_id`` and ``task_id`` matched by the caller).

    Airflow 3.4 keys the store by region (its dynamic regions): ``map_index`` became
    ``region_index``, beside a ``region_id`` that is the zero UUID for every task instance outside
    a dynamic region, which is what ``map_index`` names. Found by the column, not the version.
    """
    region_index = getattr(model, "region_index", None)
    if region_index is None:
        return [model.map_index == map_index]
    from airflow.models.dynamic_region import SENTINEL_REGION_ID  # type: ignore[import-untyped,unused-ignore]

    return [region_index == map_index, model.region_id == SENTINEL_REGION_ID]


__all__ = [
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AIRFLOW_V_3_4_PLUS",
    "NEVER_EXPIRE",
    "get_base_airflow_version_tuple",
    "task_state_store_rows_of",
]
