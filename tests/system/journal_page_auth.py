"""
How the journal page tests sign in, on each line.

Airflow 3: an auth manager, Airflow's simple one, except that the user named "outsider" may read
no DAG (the simple auth manager's roles all read every DAG).

Airflow 2.11: users of the webserver's Flask-AppBuilder, made with ``airflow users create``:
"reader" is a Viewer (reads every DAG), "outsider" has a role that may use the UI and read task
instances but read no DAG. Each signs in through the webserver's login form, as a person does.
"""

from __future__ import annotations

import re
import time
from typing import Any

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

#: On 2.11: each test user's role, and the password of all of them.
USERS = {"reader": "Viewer", "outsider": "Outsider"}
PASSWORD = "journal-page-password"

if AIRFLOW_V_3_0_PLUS:
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    class OutsiderReadsNoDag(SimpleAuthManager):
        def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
            if user.get_name() == "outsider":
                return False
            return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)


def create_webserver_users(services: Any) -> None:
    """On 2.11: the role "Outsider" (the UI and task instances, no DAG) and the users of USERS."""
    services.airflow_command("roles", "create", "Outsider")
    services.airflow_command("roles", "add-perms", "Outsider", "-r", "Website", "Task Instances", "-a", "can_read")
    for name, role in USERS.items():
        services.create_user(name, PASSWORD, role)


def log_in(session: Any, url: str, username: str, *, attempts: int = 3) -> None:
    """
    On 2.11: sign ``session`` (a ``requests.Session``) in through the webserver's login form. A
    sign-in the webserver turned down is tried again a few seconds later, as a person would: on a
    machine kept busy, a user made a moment before was once not found by the webserver yet.
    """
    for attempt in range(1, attempts + 1):
        form = session.get(f"{url}/login/", timeout=60)
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form.text)
        assert token, form.text[:2000]
        answer = session.post(
            f"{url}/login/",
            data={"username": username, "password": PASSWORD, "csrf_token": token.group(1)},
            allow_redirects=False,
            timeout=60,
        )
        if answer.status_code == 302 and "/login" not in answer.headers["Location"]:
            return
        if attempt < attempts:
            time.sleep(5)
    raise AssertionError(f"{username} could not sign in: {answer.status_code} {answer.text[:500]}")
