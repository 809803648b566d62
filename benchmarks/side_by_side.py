"""
This provider beside the published one (apache-airflow-providers-common-ai 1.0.0 on PyPI), in one
run: benchmarks/openai_agents.py's workload, N turns of one model call and one tool call against an
instant scripted model, with the journal on file://. Each provider runs in a process of its own,
their runs interleaved, best of several per N (25 at N = 10, 11 at 100, 3 at 400, 1 at 1000). Prints
one markdown table: for each provider the CPU of a recording run and of a full replay over a plain
Runner.run_sync in the same process, the journal's bytes on disk once the recording try ended, and
the clean-up's wall time after a replaying try that succeeded.

The published provider has the same distribution and import name, so it runs from a venv of its
own, built once with (this venv's Python, this project's constraints):
    python benchmarks/side_by_side.py --setup              # PyPI's 1.0.0 into /tmp/venv-published
    python benchmarks/side_by_side.py --setup --published-python ~/published/bin/python   # elsewhere
    python benchmarks/side_by_side.py --setup ~/apache_airflow_providers_common_ai-1.0.0-py3-none-any.whl
which is:
    python -m venv /tmp/venv-published
    /tmp/venv-published/bin/pip install -c constraints/airflow-3.3.txt apache-airflow openai-agents \
        apache-airflow-providers-common-ai==1.0.0

Run by hand, not in CI, with this project's venv:
    TMPDIR=/dev/shm python benchmarks/side_by_side.py > out.md     # N = 10, 100, 400, 1000
    python benchmarks/side_by_side.py --ns 10,100 --published-python /tmp/venv-published/bin/python

This provider runs from this checkout's src/, as openai_agents.py measures it (its runs(),
stored_and_clean_up()). The published one is driven as its task does on Airflow before 3.3, where
its journal is a file: journal_scope(DurableJournal(DurableStorage(...))) with [common.ai]
durable_cache_path on file:// under TMPDIR, a new storage each try, and DurableJournal.cleanup()
timed after the replaying try, as its AgentOperator calls it (a @task's run_durably_sync deletes the
run alone, one delete fewer). On Airflow 3.3 its task keeps the journal in the task state store. Its agent is openai_agents.py's agent() and tool, taken from that
file's source, since that module imports this provider. The workers' logs go to
TMPDIR/side_by_side.<provider>.log; this provider's step lines are written as a task's process on
Airflow 3 writes them (openai_agents.log_as_a_task(), to /dev/null), as openai_agents.py measures.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PUBLISHED_VENV = Path("/tmp/venv-published")
PUBLISHED = "apache-airflow-providers-common-ai==1.0.0"
KINDS = ("plain", "record", "replay")


def rounds(n: int) -> int:
    """As openai_agents.py: more rounds where a run is short, the noisier one on a shared machine."""
    return 25 if n <= 10 else 11 if n <= 100 else 3 if n <= 400 else 1


class Ours:
    """This provider, through openai_agents.py's own runs and measurement of the journal on disk."""

    def __init__(self, folder: str) -> None:
        import openai_agents

        from airflow.providers.common.ai import __version__

        self.bench, self.folder, self.version = openai_agents, folder, __version__
        self.storages: dict[int, tuple] = {}

    def _storage(self, n: int):
        if n not in self.storages:
            folder = tempfile.mkdtemp(dir=self.folder)
            self.storages[n] = (self.bench.storage_of("file://", folder), folder)
        return self.storages[n]

    def round(self, n: int) -> dict[str, float]:
        storage, _ = self._storage(n)
        seconds = {}
        for kind, run in self.bench.runs(n, storage).items():
            if kind == "record":
                self.bench.emptied(storage)
            seconds[kind] = self.bench.cpu_seconds(run)
        return seconds

    def finish(self, n: int) -> tuple[int, float]:
        storage, folder = self._storage(n)
        return self.bench.stored_and_clean_up(n, storage, folder)


class Published:
    """The published provider's journal in a file, as its task keeps it on Airflow before 3.3."""

    def __init__(self, folder: str) -> None:
        self.cache = Path(folder) / "cache"
        # Read once a process (the provider caches it): one folder for every N.
        os.environ["AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH"] = f"file://{self.cache}"
        from agents import Runner

        from airflow.providers.common.ai import __version__
        from airflow.providers.common.ai.durable.journal import DurableJournal, journal_scope
        from airflow.providers.common.ai.durable.openai_agents import run_durably_sync
        from airflow.providers.common.ai.durable.storage import DurableStorage

        self.version = __version__
        namespace = workload()
        self.agent, self.cpu_seconds = namespace["agent"], namespace["cpu_seconds"]

        def journal() -> DurableJournal:
            # A new storage each try, as a retry's process makes: it reads the file once.
            return DurableJournal(DurableStorage(dag_id="bench", task_id="t", run_id="r", map_index=-1))

        def durable(n: int, journal: DurableJournal, answers: bool):
            with journal_scope(journal):
                return run_durably_sync(self.agent(n, answers=answers), "go", max_turns=n + 2)

        self.journal, self.durable = journal, durable
        self.plain = lambda n: Runner.run_sync(self.agent(n, answers=True), "go", max_turns=n + 2)

    def emptied(self) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)

    def round(self, n: int) -> dict[str, float]:
        each = {
            "plain": lambda: self.plain(n),
            "record": lambda: self.durable(n, self.journal(), True),
            "replay": lambda: self.durable(n, self.journal(), False),
        }
        seconds = {}
        for kind, run in each.items():
            if kind == "record":
                self.emptied()
            seconds[kind] = self.cpu_seconds(run)
        return seconds

    def finish(self, n: int) -> tuple[int, float]:
        self.emptied()
        self.durable(n, self.journal(), True)
        on_disk = sum(path.stat().st_size for path in self.cache.rglob("*") if path.is_file())
        journal = self.journal()
        self.durable(n, journal, False)
        started = time.perf_counter()
        journal.cleanup()
        return on_disk, time.perf_counter() - started


def workload() -> dict:
    """openai_agents.py's agent(), its tool and its timer, run from that file's source with its SDK imports."""
    tree = ast.parse((HERE / "openai_agents.py").read_text())
    wanted = [
        node
        for node in tree.body
        if isinstance(node, ast.Import)
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("__future__", "agents"))
        or (isinstance(node, ast.FunctionDef) and node.name in ("lookup", "agent", "cpu_seconds"))
    ]
    namespace: dict = {}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(HERE / "openai_agents.py"), "exec"), namespace)
    return namespace


def serve(provider: str, results_fd: int) -> None:
    """A worker: one provider's runs, as the parent asks on stdin; answers one JSON line each on results_fd."""
    results = os.fdopen(results_fd, "w")
    with tempfile.TemporaryDirectory() as folder:
        runner = Ours(folder) if provider == "ours" else Published(folder)
        if provider == "ours":
            # As openai_agents.py measures it: its per-step INFO lines written as a task's process
            # writes them. The published provider logs its steps at DEBUG only.
            runner.bench.log_as_a_task()
        import agents

        results.write(json.dumps({"provider": runner.version, "agents": agents.__version__}) + "\n")
        results.flush()
        for line in sys.stdin:
            command, n = line.split()
            answer = runner.round(int(n)) if command == "round" else runner.finish(int(n))
            results.write(json.dumps(answer) + "\n")
            results.flush()


class Worker:
    """A provider's process, started with its own Python, and the pipes to it."""

    def __init__(self, provider: str, python: str, env: dict[str, str]) -> None:
        read, write = os.pipe()
        self.log = Path(tempfile.gettempdir()) / f"side_by_side.{provider}.log"
        self.process = subprocess.Popen(
            [python, __file__, "--worker", provider, "--results-fd", str(write)],
            stdin=subprocess.PIPE,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(write,),
            text=True,
        )
        os.close(write)
        self.results = os.fdopen(read)
        self.versions = self._answer()

    def ask(self, command: str, n: int):
        self.process.stdin.write(f"{command} {n}\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self):
        line = self.results.readline()
        if not line:
            raise RuntimeError(f"the worker stopped; its log is {self.log}")
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def measure(ns: list[int], published_python: str) -> None:
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    ours_env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    # Nothing of this checkout on the published side's path.
    published_env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    workers = {
        "ours": Worker("ours", sys.executable, ours_env),
        "published": Worker("published", published_python, published_env),
    }
    for name, worker in workers.items():
        print(f"<!-- {name}: provider {worker.versions['provider']}, openai-agents {worker.versions['agents']} -->")
    print(
        "| N | ours record / plain | ours replay / plain | ours KiB on disk | ours clean-up ms "
        "| published record / plain | published replay / plain | published KiB on disk | published clean-up ms "
        "| plain s (ours, published) | load |"
    )
    print("| ---: " * 11 + "|", flush=True)
    try:
        for n in ns:
            best = {name: dict.fromkeys(KINDS, float("inf")) for name in workers}
            for round_ in range(rounds(n)):
                # Interleaved, each provider first every other round: the machine's noise only ever adds time.
                for name in list(workers)[:: 1 if round_ % 2 == 0 else -1]:
                    for kind, seconds in workers[name].ask("round", n).items():
                        best[name][kind] = min(best[name][kind], seconds)
            cells = []
            for name, worker in workers.items():
                on_disk, clean_up = worker.ask("finish", n)
                kinds = best[name]
                cells += [
                    f"{kinds['record'] / kinds['plain']:.2f}",
                    f"{kinds['replay'] / kinds['plain']:.2f}",
                    f"{on_disk / 1024:.1f}",
                    f"{clean_up * 1000:.2f}",
                ]
            plains = f"{best['ours']['plain']:.3f}, {best['published']['plain']:.3f}"
            print(f"| {n} | {' | '.join(cells)} | {plains} | {os.getloadavg()[0]:.1f} |", flush=True)
    finally:
        for worker in workers.values():
            worker.close()


def setup(published: str, venv: Path) -> None:
    """Build the published provider's venv with this project's constraints."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    constraints = HERE.parent / "constraints" / "airflow-3.3.txt"
    pip = [str(venv / "bin" / "pip"), "install", "-c", str(constraints)]
    subprocess.run([*pip, "apache-airflow", "openai-agents", published], check=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--ns", default="10,100,400,1000", help="numbers of turns, comma-separated")
    parser.add_argument("--published-python", default=str(PUBLISHED_VENV / "bin" / "python"))
    parser.add_argument(
        "--setup", nargs="?", const=PUBLISHED, metavar="WHEEL", help="build the venv of --published-python"
    )
    parser.add_argument("--worker", choices=("ours", "published"), help=argparse.SUPPRESS)
    parser.add_argument("--results-fd", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.setup:
        setup(arguments.setup, Path(arguments.published_python).parents[1])
    elif arguments.worker:
        serve(arguments.worker, arguments.results_fd)
    else:
        measure([int(n) for n in arguments.ns.split(",")], arguments.published_python)
