"""Airflow version flags for this provider.

Version differences live here and only here, in the style of Airflow's own providers.
Prefer a feature check at run time (``context.get("task_state_store")``) over these flags
where one is possible.
"""

from __future__ import annotations

from datetime import timedelta


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    from packaging.version import Version

    from airflow import __version__

    airflow_version = Version(__version__)
    return airflow_version.major, airflow_version.minor, airflow_version.micro


AIRFLOW_V_3_0_PLUS: bool = get_base_airflow_version_tuple() >= (3, 0, 0)
#: Human-in-the-loop (approvals) arrived in 3.1; of the lines this provider supports, 3.2 is the first with it.
AIRFLOW_V_3_2_PLUS: bool = get_base_airflow_version_tuple() >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS: bool = get_base_airflow_version_tuple() >= (3, 3, 0)

if AIRFLOW_V_3_3_PLUS:
    from airflow.sdk.execution_time.context import NEVER_EXPIRE
else:
    # The task state store arrived in 3.3; this is the same object it compares a retention with.
    NEVER_EXPIRE = timedelta.max

__all__ = [
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "NEVER_EXPIRE",
    "get_base_airflow_version_tuple",
]
