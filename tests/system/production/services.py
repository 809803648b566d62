"""
The parts of a production deployment, started on this machine for the tests and stopped after
them, even when a test fails: PostgreSQL (the metadata database; on 3.3 it holds the journal in
the task state store), Redis (the Celery broker), and Celery workers beside AirflowServices'
api-server, scheduler and dag-processor. Each process runs in a process group of its own, sent
SIGTERM when the test process dies.

PostgreSQL and Redis come from Debian packages (scripts/production.sh installs them when missing).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from airflow_services import AIRFLOW, AirflowServices, _free_port, _in_own_group_ending_with_this_process

WORKER_PATH = Path(__file__).parent / "worker_path"


def _program(name: str) -> str:
    """A PostgreSQL or Redis program, from PATH or Debian's versioned PostgreSQL folder."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise RuntimeError(
            f"{name} is not installed: run scripts/production.sh, which installs postgresql and redis-server"
        )
    return found


def _start(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        preexec_fn=_in_own_group_ending_with_this_process,
    )


def _stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    """Stop a process group started by :func:`_start`; SIGKILL after ``timeout``."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    # What is left of the group: children that outlived their leader.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_for(what: str, ready, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        if ready():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} was not ready in {timeout} s:\n{log.read_text(errors='replace')[-3000:]}")


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class PostgreSQL:
    """A throwaway PostgreSQL cluster on 127.0.0.1 with a database ``airflow``; ``url`` reaches it."""

    def __enter__(self) -> PostgreSQL:
        # Not under pytest's tmp_path: PostgreSQL refuses to run as root, and its own user must reach the folder.
        self.folder = Path(tempfile.mkdtemp(prefix="durable-postgres-"))
        self.folder.chmod(0o755)
        self.port = _free_port()
        as_owner: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            as_owner = ["runuser", "-u", "postgres", "--"]
        data = self.folder / "data"
        log = Path(tempfile.gettempdir()) / f"{self.folder.name}.log"
        self.log = log
        self._process: subprocess.Popen | None = None
        try:
            subprocess.run(
                [
                    *as_owner,
                    _program("initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "airflow",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            settings = ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off"]
            settings += ["-c", "synchronous_commit=off", "-c", "max_connections=200"]
            self._process = _start(
                [
                    *as_owner,
                    _program("postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.folder),
                    *settings,
                ],
                log,
            )
            _wait_for("PostgreSQL", self._is_ready, self._process, log)
            import psycopg2

            connection = psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="postgres")
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute("CREATE DATABASE airflow")
            connection.close()
        except BaseException:
            self.__exit__()
            raise
        self.url = f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/airflow"
        return self

    def _is_ready(self) -> bool:
        return (
            subprocess.run(
                [_program("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
            ).returncode
            == 0
        )

    def query(self, sql: str, *parameters: object) -> list[tuple]:
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", dbname="airflow")
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, parameters)
                return cursor.fetchall()
        finally:
            connection.close()

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            # SIGINT: PostgreSQL's fast shutdown, which does not wait for clients to disconnect.
            _stop(self._process, signal.SIGINT)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.log.unlink(missing_ok=True)


class Redis:
    """A Redis server on 127.0.0.1 that keeps nothing on disk; ``url`` is the Celery broker URL."""

    def __enter__(self) -> Redis:
        self.folder = Path(tempfile.mkdtemp(prefix="durable-redis-"))
        port = _free_port()
        log = self.folder / "redis.log"
        self._process = _start(
            [
                _program("redis-server"),
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            log,
        )
        try:
            _wait_for("Redis", lambda: _accepts(port), self._process, log)
        except BaseException:
            self.__exit__()
            raise
        self.url = f"redis://127.0.0.1:{port}/0"
        return self

    def __exit__(self, *exc_info: object) -> None:
        _stop(self._process)
        shutil.rmtree(self.folder, ignore_errors=True)


class CeleryWorkers:
    """Celery workers of ``services``' deployment, each with one task slot and a name of its own."""

    def __init__(self, services: AirflowServices) -> None:
        self.services = services
        self.processes: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> CeleryWorkers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for name in list(self.processes):
            self.stop(name)

    def running(self, name: str) -> bool:
        return name in self.processes and self.processes[name].poll() is None

    def start(self, name: str) -> None:
        """Start worker ``name`` and wait until it takes tasks; its task instances' hostname is ``name``."""
        env = {
            **self.services.env,
            "DURABLE_WORKER_NAME": name,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(WORKER_PATH), os.environ.get("PYTHONPATH")])),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "durable_worker_name.hostname",
        }
        log = self.services.logs / f"{name}.log"
        command = [AIRFLOW, "celery", "worker", "--celery-hostname", f"{name}@%h", "--concurrency", "1"]
        command += ["--skip-serve-logs", "--without-gossip", "--without-mingle"]
        self.processes[name] = process = _start(command, log, env)
        _wait_for(f"Celery worker {name}", lambda: " ready." in log.read_text(errors="replace"), process, log, 120)

    def kill(self, name: str) -> None:
        """SIGKILL the whole worker: the Celery process, its pool and the task processes it runs."""
        _stop(self.processes.pop(name), signal.SIGKILL, timeout=10)

    def stop(self, name: str) -> None:
        _stop(self.processes.pop(name))


def migrate_database(env: dict[str, str]) -> None:
    result = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{(result.stdout + result.stderr)[-4000:]}")
