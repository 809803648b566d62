"""
The journal's I/O through a real Airflow: api-server, scheduler (LocalExecutor) and dag-processor
in their own processes over a throwaway SQLite database, as the system tests start them. One DAG
run of ``benchmarks/dags/store_round_trips.py`` measures, in its worker process, N turns of one
model call and one tool call against an instant scripted model: plain ``Runner.run_sync``, a
recording ``run_durably_sync``, a full replay and the clean-up after success, on the task state
store (reached through the Task SDK's supervisor comms and the api-server, as in production) and
on ``file://``. Prints markdown tables.

Run by hand, not in CI, from the repository root:

    .venv/bin/python benchmarks/store_round_trips.py [--src PATH] [--ns 10,100,400] [--json FILE]

``--src`` is the provider's source folder the services import (default: this checkout's ``src``),
to measure another checkout, e.g. a ``git worktree``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "system"))

from airflow_services import AIRFLOW, AirflowServices  # noqa: E402

DAG_ID, TASK_ID = "store_round_trips", "measure"


def _describe(src: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "?"
    return f"{commit}{' + uncommitted changes' if git('status', '--porcelain', '--', '.') else ''}"


def run(src: Path, ns: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="store-round-trips-") as home:
        out = Path(home, "results.json")
        env = {
            "AIRFLOW_HOME": home,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # Before the editable install's .pth entry on sys.path: this source is the provider.
            "PYTHONPATH": str(src),
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "STORE_ROUND_TRIPS_OUT": str(out),
            "STORE_ROUND_TRIPS_NS": ns,
        }
        environ = {key: value for key, value in os.environ.items() if key != "AIRFLOW__CORE__UNIT_TEST_MODE"}
        subprocess.run([AIRFLOW, "db", "migrate"], env={**environ, **env}, check=True, capture_output=True)
        with AirflowServices(ROOT / "benchmarks" / "dags", Path(home, "service_logs"), env) as airflow:
            run_id = airflow.trigger(DAG_ID)
            instance = airflow.wait_for_task(DAG_ID, run_id, TASK_ID, timeout=3600)
            if instance["state"] != "success":
                log = airflow.task_log(DAG_ID, run_id, TASK_ID, instance["try_number"])
                raise RuntimeError(f"the measuring task ended {instance['state']}:\n{log[-6000:]}")
        return json.loads(out.read_text())


def tables(results: dict) -> str:
    lines = [
        f"Provider: `{results['journal_module']}` ({results['source']}); Airflow {results['airflow']}, "
        f"openai-agents {results['openai_agents']}, Python {results['python']}, {results['cpus']} CPUs; "
        f"{results['date']}; the whole run took {results['total_s']:.0f} s.",
        "",
        "Store calls through the comms and the api-server, 1 KB values (one call: median of 50):",
        "",
        *(f"- {name}: {ms:.1f} ms" for name, ms in results["round_trip_ms"].items()),
        "",
        "| storage | N | plain s | record s | replay s | clean-up s | record ms/turn over plain "
        "| replay ms/turn over plain | record / plain | replay / plain |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results["rows"]:
        plain, n = row["plain_s"], row["n"]
        lines.append(
            f"| {row['storage']} | {n} | {plain:.3f} | {row['record_s']:.3f} | {row['replay_s']:.3f} "
            f"| {row['clean_up_s']:.3f} | {(row['record_s'] - plain) / n * 1000:+.1f} "
            f"| {(row['replay_s'] - plain) / n * 1000:+.1f} | {row['record_s'] / plain:.2f} "
            f"| {row['replay_s'] / plain:.2f} |"
        )
    lines += [
        "",
        'Task state store calls (steps = 2N + 1; of the repetition that took the best time; "in calls" sums the wall time '
        "spent inside the store calls):",
        "",
        "| N | phase | get | set | delete | calls / step | sets / step | s in calls | ms / call |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results["rows"]:
        for phase, calls in row["store_calls"].items():
            total = sum(calls.get(kind, 0) for kind in ("get", "set", "delete"))
            lines.append(
                f"| {row['n']} | {phase.replace('_', '-')} | {calls.get('get', 0)} | {calls.get('set', 0)} "
                f"| {calls.get('delete', 0)} | {total / row['steps']:.2f} | {calls.get('set', 0) / row['steps']:.2f} "
                f"| {calls['seconds']:.3f} | {calls['seconds'] / total * 1000 if total else 0:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the provider's source folder to measure")
    parser.add_argument("--ns", default="10,100,400", help="numbers of turns, comma-separated")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    src = args.src.resolve()
    if not (src / "airflow" / "providers" / "common" / "ai" / "durable" / "core" / "journal.py").is_file():
        parser.error(f"{src} holds no airflow/providers/common/ai/durable/core/journal.py")
    started = time.perf_counter()
    results = run(src, args.ns)
    results.update(
        source=_describe(src),
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        total_s=time.perf_counter() - started,
    )
    if not results["journal_module"].startswith(str(src)):
        raise RuntimeError(f"the task imported {results['journal_module']}, not the source under {src}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(tables(results))


if __name__ == "__main__":
    main()
