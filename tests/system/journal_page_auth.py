"""An auth manager for the journal page tests: Airflow's simple one, except that the user named
"outsider" may read no DAG (the simple auth manager's roles all read every DAG)."""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class OutsiderReadsNoDag(SimpleAuthManager):
    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() == "outsider":
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
