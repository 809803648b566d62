"""
A real Airflow in subprocesses: api-server, scheduler with LocalExecutor (each try its own worker
process), and dag-processor, over the test session's database. Tests trigger and clear DAG runs
through the REST API, as a user would, and read the outcome from the database.

On Airflow 2.11 the same, in the form that line takes: the webserver (Flask-AppBuilder, REST API
v1 with basic auth as the user ``admin``) instead of the api-server, the scheduler parses the
DAGs itself, and its executor is the SequentialExecutor (2.11 refuses the LocalExecutor on
SQLite), each try still its own process.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS, AIRFLOW_V_3_4_PLUS

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
#: The REST API's root: v2 on the api-server of Airflow 3, v1 on 2.11's webserver.
API = "/api/v2" if AIRFLOW_V_3_0_PLUS else "/api/v1"
#: On 2.11, the webserver's user the services' REST calls are made as (basic auth), an Admin.
ADMIN = ("admin", "admin-password")
FINISHED = frozenset({"success", "failed", "upstream_failed", "skipped"})


def _in_own_group_ending_with_this_process() -> None:
    """For Popen(preexec_fn=...): a process group of its own, sent SIGTERM if the test process dies."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the fixture's teardown still stops them
        pass


def _is_running(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a child of the worker that has exited but was not reaped yet is done too
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def clear_body(run_id: str, task_id: str, *, keep_task_state: bool = True, **more: Any) -> dict[str, Any]:
    """The body of a ``clearTaskInstances`` request for one task instance; ``keep_task_state`` is Airflow 3.4's."""
    body = {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False, **more}
    if AIRFLOW_V_3_4_PLUS:
        body["keep_task_state"] = keep_task_state
    return body


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class AirflowServices:
    """Use as a context manager; every process it starts is stopped on exit, in its own process group."""

    def __init__(self, dags_folder: Path, logs: Path, env: dict[str, str]) -> None:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.logs = logs
        environ = {
            key: value
            for key, value in os.environ.items()
            if key not in ("AIRFLOW__CORE__UNIT_TEST_MODE", "OPENAI_API_KEY")
        }
        self.env = {
            **environ,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            # Every service must sign and check the workers' tokens with the same secret.
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
            # Not the default 8794: two test sessions on one machine (CI runs two) each start one.
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
            # Airflow's advice for timeouts under high load (its default is 5 s): on a loaded
            # 2-core machine a worker's call to the api-server can take longer.
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            # A worker parses the DAG file at the start of each try, the DAG processor as it lists it:
            # on a machine kept busy, in more than the 30 s and 50 s they allow (3.3 then reschedules
            # the try "Dag not found" for a minute later, the test's wait runs out).
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "300",
            "AIRFLOW__CORE__DAG_FILE_PROCESSOR_TIMEOUT": "300",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "600",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            **({} if AIRFLOW_V_3_0_PLUS else self._webserver_env(port)),
            **env,
        }
        self._processes: dict[str, subprocess.Popen] = {}

    @staticmethod
    def _webserver_env(port: int) -> dict[str, str]:
        """What 2.11 needs besides: an executor it runs on SQLite, the webserver's port, one worker, basic auth."""
        return {
            "AIRFLOW__CORE__EXECUTOR": "SequentialExecutor",
            # It starts each try as `airflow tasks run`, found on the PATH: this venv's.
            "PATH": f"{Path(AIRFLOW).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "AIRFLOW__WEBSERVER__WEB_SERVER_PORT": str(port),
            "AIRFLOW__WEBSERVER__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__WEBSERVER__WORKERS": "1",
            # On a loaded machine a gunicorn worker can take minutes to answer or to boot: by default
            # 2.11 kills it after 120 s and, when its replacement is not up 120 s later, shuts the
            # whole webserver down (CI saw the REST API refuse connections in the middle of a test).
            "AIRFLOW__WEBSERVER__WEB_SERVER_WORKER_TIMEOUT": "600",
            "AIRFLOW__WEBSERVER__WEB_SERVER_MASTER_TIMEOUT": "600",
            "AIRFLOW__WEBSERVER__SECRET_KEY": secrets.token_hex(16),
            # Sessions in a signed cookie, not in SQLite: on a busy machine the scheduler holds the
            # database's lock, and a session the login form could not store signed nobody in.
            "AIRFLOW__WEBSERVER__SESSION_BACKEND": "securecookie",
            # Tests log several users in within seconds; 2.11 allows 5 logins in 40 s by default.
            "AIRFLOW__WEBSERVER__AUTH_RATE_LIMITED": "False",
            # Basic auth for the services' own calls; the session for the UI's (the connection form's Test button).
            "AIRFLOW__API__AUTH_BACKENDS": "airflow.providers.fab.auth_manager.api.auth.backend.basic_auth,"
            "airflow.providers.fab.auth_manager.api.auth.backend.session",
        }

    def airflow_command(self, *arguments: str) -> str:
        """Run ``airflow <arguments>`` with the services' settings; returns its output, raises if it fails."""
        result = subprocess.run([AIRFLOW, *arguments], env=self.env, capture_output=True, text=True, timeout=300)
        if result.returncode:
            raise RuntimeError(
                f"airflow {' '.join(arguments)} exited with {result.returncode}:\n{result.stderr[-3000:]}"
            )
        return result.stdout

    def create_user(self, username: str, password: str, role: str) -> None:
        """On 2.11: a user of the webserver (Flask-AppBuilder), with one of its roles."""
        self.airflow_command(
            "users", "create", "--username", username, "--password", password, "--role", role,
            "--firstname", username, "--lastname", "test", "--email", f"{username}@example.com",
        )  # fmt: skip

    def _commands(self) -> tuple[tuple[str, list[str]], ...]:
        if not AIRFLOW_V_3_0_PLUS:
            # 2.11's scheduler parses the DAG files itself (no standalone dag-processor by default).
            return (
                ("webserver", ["webserver", "--port", self.env["AIRFLOW__WEBSERVER__WEB_SERVER_PORT"]]),
                ("scheduler", ["scheduler"]),
            )
        return (
            ("api-server", ["api-server", "--port", self.env["AIRFLOW__API__PORT"]]),
            ("scheduler", ["scheduler"]),
            ("dag-processor", ["dag-processor"]),
        )

    def __enter__(self) -> AirflowServices:
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            if not AIRFLOW_V_3_0_PLUS:
                self.create_user(*ADMIN, "Admin")
            for name, command in self._commands():
                self._processes[name] = subprocess.Popen(
                    [AIRFLOW, *command],
                    env=self.env,
                    stdout=(self.logs / f"{name}.log").open("w"),
                    stderr=subprocess.STDOUT,
                    preexec_fn=_in_own_group_ending_with_this_process,
                )
            self._wait_until_healthy(timeout=180)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._fail_unfinished_runs()
        for process in self._processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for process in self._processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._processes.clear()

    def _fail_unfinished_runs(self) -> None:
        """
        Mark every DAG run still queued or running failed, as a user would before shutting down.

        The tries these services stop are left running in the shared database; the next test
        module's scheduler would find them and retry them against its own model server.
        """
        try:
            self.ensure_running()
            runs = self._request("GET", f"{API}/dags/~/dagRuns?state=queued&state=running&limit=100")["dag_runs"]
            for run in runs:
                self._request("PATCH", f"{API}/dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}", {"state": "failed"})
        except (OSError, RuntimeError, KeyError):
            pass  # the services are gone already: nothing of theirs runs on

    def wait_for_json(self, pattern: Path, timeout: float = 180) -> Any:
        """
        What the first file matching ``pattern`` (a glob in its last part) holds, once a task wrote
        all of it: a file seen the moment it was created can still be empty.
        """
        deadline = time.monotonic() + timeout
        while True:
            for path in pattern.parent.glob(pattern.name):
                with contextlib.suppress(ValueError):
                    return json.loads(path.read_text())
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{pattern} was not written in {timeout} s:\n{self.service_log('scheduler')[-4000:]}"
                )
            self.ensure_running()
            time.sleep(0.2)

    def service_log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def _request(self, method: str, path: str, body: Any = None, *, patient: bool = True) -> Any:
        """The REST call's JSON answer.

        If ``patient``, a refused connection is tried again for a minute, and a GET that got no
        answer in 30 s (a web server starved of CPU on a loaded CI machine) for three minutes, then
        its timeout is raised (an ``OSError``, which callers that poll take as "busy"): a GET
        changes nothing, so asking again is safe; another method's timeout is raised at once.
        """
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", **self._authorization()},
        )
        started = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return json.loads(response.read() or b"null")
            except (urllib.error.URLError, TimeoutError) as error:
                reason = getattr(error, "reason", error)
                refused = isinstance(reason, ConnectionRefusedError)
                slow = isinstance(reason, TimeoutError) and method == "GET"
                if not patient or not (refused or slow):
                    raise
                # Nothing listens (a web server restarting its workers, or one that died: then
                # ensure_running says so, with its log), or nothing answered in time.
                self.ensure_running()
                waited = time.monotonic() - started
                if slow and waited > 180:
                    raise
                if refused and waited > 60:
                    name = "api-server" if AIRFLOW_V_3_0_PLUS else "webserver"
                    raise RuntimeError(
                        f"airflow {name} refused {method} {path} for 60 s:\n{self.service_log(name)[-3000:]}"
                    ) from error
                time.sleep(1)

    @staticmethod
    def _authorization() -> dict[str, str]:
        if AIRFLOW_V_3_0_PLUS:  # the simple auth manager's users are all admins here
            return {}
        return {"Authorization": "Basic " + base64.b64encode(":".join(ADMIN).encode()).decode()}

    def ensure_running(self) -> None:
        """Raise, with the end of its log, if a service has exited: nothing it does would come."""
        for name, process in self._processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"airflow {name} exited with {process.returncode}:\n{self.service_log(name)[-3000:]}"
                )

    def _wait_until_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        health: Any = None
        while time.monotonic() < deadline:
            self.ensure_running()
            try:
                health = self._request(
                    "GET", "/api/v2/monitor/health" if AIRFLOW_V_3_0_PLUS else "/health", patient=False
                )
            except OSError:
                health = None
            parts = (
                ("metadatabase", "scheduler", "dag_processor") if AIRFLOW_V_3_0_PLUS else ("metadatabase", "scheduler")
            )
            if health and all(health[part]["status"] == "healthy" for part in parts):
                return
            time.sleep(1)
        raise TimeoutError(f"Airflow was not healthy after {timeout} s: {health}")

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self._request("GET", f"{API}/dags/{dag_id}")
                return
            except OSError:
                time.sleep(1)
        parser = "dag-processor" if AIRFLOW_V_3_0_PLUS else "scheduler"
        raise TimeoutError(f"the {parser} did not parse {dag_id} in {timeout} s:\n{self.service_log(parser)[-3000:]}")

    def trigger(self, dag_id: str, timeout: float = 60) -> str:
        """
        Start a DAG run; returns its run id. The DAG's row can be read a moment before its
        serialized form is written, and a run is refused with 404 until it is: that is asked again.
        """
        self.wait_for_dag(dag_id)
        body = {"logical_date": None} if AIRFLOW_V_3_0_PLUS else {}
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._request("POST", f"{API}/dags/{dag_id}/dagRuns", body)["dag_run_id"]
            except urllib.error.HTTPError as error:
                if error.code != 404 or time.monotonic() > deadline:
                    raise
            self.ensure_running()
            time.sleep(1)

    def clear(self, dag_id: str, run_id: str, task_id: str, *, keep_task_state: bool = True) -> None:
        """
        Clear one task instance of a DAG run that finished, as the UI's Clear button does.

        Airflow 3.4's clear discards the task instance's task state store, its journal with it,
        unless asked to keep it: ``keep_task_state`` is that choice (the UI's "keep task state").

        A clear right after the task finished could race the scheduler, which may still be
        marking the DAG run finished; a user sees the finished run first, and so does this.
        """
        self.wait_for_dag_run_finished(dag_id, run_id)
        self._request(
            "POST",
            f"{API}/dags/{dag_id}/clearTaskInstances",
            clear_body(run_id, task_id, keep_task_state=keep_task_state, reset_dag_runs=True),
        )

    def wait_for_dag_run_finished(self, dag_id: str, run_id: str, timeout: float = 60) -> None:
        """
        Wait until the scheduler marked the DAG run finished. A clear (or a fork, which clears)
        made while it still marks it can be undone by it: the cleared task then never runs.
        """
        deadline = time.monotonic() + timeout
        while (state := self._request("GET", f"{API}/dags/{dag_id}/dagRuns/{run_id}")["state"]) not in (
            "success",
            "failed",
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"DAG run {run_id} of {dag_id} did not finish in {timeout} s: {state}")
            time.sleep(0.5)

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self._request("GET", f"{API}/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def wait_for_task(
        self, dag_id: str, run_id: str, task_id: str, *, try_number: int = 1, timeout: float = 420
    ) -> dict[str, Any]:
        """
        Wait until try ``try_number`` (or a later one) of the task instance finished and its worker
        process exited; returns the instance. The timeout only stops a hang: on a loaded CI the
        scheduler took 2 minutes to queue a DAG run's first task.

        The state changes before the worker's listeners have run (the ``Durable:`` summary, the
        journal's deletion), so the process that ran the try is waited for as well.
        """
        deadline = time.monotonic() + timeout
        instance: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self.ensure_running()
            try:
                instance = self.task_instance(dag_id, run_id, task_id)
            except urllib.error.HTTPError as error:
                if error.code != 404:  # 404: the scheduler has not created the task instance yet
                    raise
            else:
                finished = instance["state"] in FINISHED and instance["try_number"] >= try_number
                if finished and not _is_running(instance.get("pid")):
                    return instance
            time.sleep(0.5)
        raise TimeoutError(f"{dag_id}.{task_id} of {run_id} did not finish try {try_number} in {timeout} s: {instance}")

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The log of one try, as the worker wrote it."""
        path = (
            Path(self.env["AIRFLOW_HOME"], "logs")
            / f"dag_id={dag_id}"
            / f"run_id={run_id}"
            / f"task_id={task_id}"
            / f"attempt={try_number}.log"
        )
        return path.read_text(errors="replace")
