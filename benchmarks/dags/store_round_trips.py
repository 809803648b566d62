"""
The DAG of ``benchmarks/store_round_trips.py``: one task that measures, in its own worker process,
the journal's cost when the task state store is reached as in production (Task SDK supervisor
comms, then the api-server), next to a plain ``Runner.run_sync`` and to ``file://``.

It writes its results as JSON to ``$STORE_ROUND_TRIPS_OUT``; ``$STORE_ROUND_TRIPS_NS`` lists the
numbers of turns (default ``10,100,400``). Run by hand through the script, never in CI.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task

KINDS = ("plain", "record", "replay", "clean_up")


def repetitions(n: int) -> int:
    """Best of a few where cheap: the SDK's loop is quadratic in N."""
    return 5 if n <= 10 else 3 if n <= 100 else 1


class CountingAccessor:
    """
    ``context["task_state_store"]`` with each get / set / delete counted and timed (summed wall
    time of the calls), and the keys set remembered, to check that clean-up left none.
    """

    def __init__(self, inner):
        import threading
        from collections import Counter

        self.inner = inner
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0
        self.written: set[str] = set()

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.seconds = 0.0

    def _timed(self, name, call, *args, **kwargs):
        import time

        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            with self._lock:
                self.calls[name] += 1
                self.seconds += time.perf_counter() - started

    def get(self, key, default=None):
        return self._timed("get", self.inner.get, key, default)

    def set(self, key, value, **kwargs):
        with self._lock:
            self.written.add(key)
        return self._timed("set", self.inner.set, key, value, **kwargs)

    def delete(self, key):
        return self._timed("delete", self.inner.delete, key)

    def clear(self):
        raise AssertionError("the journal must not clear the task's whole store: it would drop the task's own keys")


def _lookup_agent(n: int, *, answers: bool):
    """N turns of one function tool call each, then "done"; returns the agent, its model and the tool's call count."""
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    ran: list[int] = []

    @function_tool
    def lookup(i: int) -> str:
        """Looks up item i."""
        ran.append(i)
        return f"item {i}: " + "x" * 200

    steps = [[function_call("lookup", {"i": i}, call_id=f"call_{i}")] for i in range(n)]
    steps.append([assistant_message("done")])
    model = ScriptedModel(steps if answers else [])
    agent = Agent(name="bench", instructions="Look items up.", model=model, tools=[lookup])
    return agent, model, ran


def _settled(journal) -> None:
    """
    A recording is timed until its writes are in the store. A run settles its journal before it
    returns, so this waits for nothing; a provider without ``settle`` (before issue 13) wrote as it went.
    """
    settle = getattr(journal, "settle", None)
    if settle is not None:
        settle()


def _measure(n: int, storages: dict, counting: CountingAccessor) -> list[dict]:
    """Interleaved plain / record / replay / clean-up runs for each storage, best wall time of each."""
    import gc
    import time

    from agents import Runner

    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.scope import journal_scope
    from airflow.providers.common.ai.durable.openai_agents import run_durably_sync

    def timed(function, *args) -> float:
        gc.collect()
        started = time.perf_counter()
        function(*args)
        return time.perf_counter() - started

    def durable(journal, agent) -> None:
        with journal_scope(journal):
            assert run_durably_sync(agent, "go", max_turns=n + 2).final_output == "done"
        _settled(journal)

    def plain() -> None:
        agent, model, ran = _lookup_agent(n, answers=True)
        assert Runner.run_sync(agent, "go", max_turns=n + 2).final_output == "done"
        assert (len(model.calls), len(ran)) == (n + 1, n)

    best = {name: dict.fromkeys(KINDS, float("inf")) for name in storages}
    calls: dict[str, dict] = {}  # the store calls of the repetition that took the best time

    def keep(name: str, kind: str, seconds: float) -> None:
        if seconds < best[name][kind]:
            best[name][kind] = seconds
            calls[f"{name} {kind}"] = {**counting.calls, "seconds": counting.seconds}
        counting.reset()

    for _ in range(repetitions(n)):
        plain_s = timed(plain)
        for name, (make_storage, left_over) in storages.items():
            best[name]["plain"] = min(best[name]["plain"], plain_s)
            assert left_over() == [], f"{name}: a journal is left from before: {left_over()[:5]}"
            counting.reset()

            agent, model, ran = _lookup_agent(n, answers=True)
            # A storage made for each try, as a worker makes it: a replay reads its segments first.
            keep(name, "record", timed(durable, DurableJournal(make_storage()), agent))
            assert (len(model.calls), len(ran)) == (n + 1, n), "the recording run must call the model and the tool"

            replaying = DurableJournal(make_storage())
            agent, model, ran = _lookup_agent(n, answers=False)
            keep(name, "replay", timed(durable, replaying, agent))
            # Honest numbers: the replay reached neither the model nor the tool.
            assert (len(model.calls), len(ran)) == (0, 0), (
                f"replay: {len(model.calls)} model calls, {len(ran)} tool runs"
            )

            keep(name, "clean_up", timed(replaying.delete))
            assert left_over() == [], f"{name}: clean-up left {left_over()[:5]}"
            counting.written.clear()  # checked: none is left
    steps = 2 * n + 1  # n model calls that ask for the tool, n tool calls, the final model call
    return [
        {
            "storage": name,
            "n": n,
            "steps": steps,
            "repetitions": repetitions(n),
            **{f"{kind}_s": best[name][kind] for kind in KINDS},
            "store_calls": {
                kind: calls[f"{name} {kind}"] for kind in ("record", "replay", "clean_up") if name == "task state store"
            },
        }
        for name in storages
    ]


def _round_trips(accessor, times: int = 50) -> dict[str, float]:
    """
    Median wall ms of one call of each kind through the comms and the api-server, on a 1 KB value;
    and the wall ms of ``times`` gets one after the other against the same gets from 4 threads
    (best of 3).
    """
    import statistics
    import time
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from airflow.configuration import conf

    from airflow.providers.common.ai.version_compat import NEVER_EXPIRE

    keys = [f"store_round_trips/probe/{i}" for i in range(times)]
    value = "x" * 1000

    def each(call) -> float:
        seconds = []
        for key in keys:
            started = time.perf_counter()
            call(key)
            seconds.append(time.perf_counter() - started)
        return statistics.median(seconds) * 1000

    def all_of(map_) -> float:
        started = time.perf_counter()
        assert list(map_(accessor.get, keys)) == [value] * times
        return (time.perf_counter() - started) * 1000

    measured = {
        "set": each(lambda key: accessor.set(key, value, retention=NEVER_EXPIRE)),
        "get": each(accessor.get),
    }
    in_a_row, from_threads = [], []
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):  # interleaved, best of each
            in_a_row.append(all_of(map))
            from_threads.append(all_of(pool.map))
    measured[f"{times} gets in a row"] = min(in_a_row)
    measured[f"{times} gets from 4 threads"] = min(from_threads)
    measured.update(_overlap(accessor, keys, value))
    measured["delete"] = each(accessor.delete)
    measured["get missing"] = each(accessor.get)
    # The floor of a call: an HTTP request to the api-server that reads no database, on a kept-alive
    # connection as the supervisor's client has.
    with httpx.Client(base_url=conf.get("core", "execution_api_server_url")) as client:
        measured["HTTP GET /execution/health"] = each(lambda key: client.get("health").raise_for_status())
    return measured


def _overlap(accessor, keys: list[str], value: str, cpu_ms: float = 5.0) -> dict[str, float]:
    """
    Whether store calls made from a background thread hide behind the agent's own CPU work: wall ms
    of one set per key each followed by ``cpu_ms`` of pure-Python work, against the same sets in one
    background thread while the work runs; best of 3 each.
    """
    import time
    from concurrent.futures import ThreadPoolExecutor

    from airflow.providers.common.ai.version_compat import NEVER_EXPIRE

    def work() -> None:
        until = time.perf_counter() + cpu_ms / 1000
        while time.perf_counter() < until:
            sum(range(200))

    def set_(key: str) -> None:
        accessor.set(key, value, retention=NEVER_EXPIRE)

    def wall(function) -> float:
        started = time.perf_counter()
        function()
        return (time.perf_counter() - started) * 1000

    def in_a_row() -> None:
        for key in keys:
            set_(key)
            work()

    def in_the_background() -> None:
        with ThreadPoolExecutor(1) as pool:
            pending = [pool.submit(set_, key) for key in keys]
            for _ in keys:
                work()
            for future in pending:
                future.result()

    times = {"alone": [], "row": [], "background": []}
    for _ in range(3):
        times["alone"].append(wall(lambda: [work() for _ in keys]))
        times["row"].append(wall(in_a_row))
        times["background"].append(wall(in_the_background))
    what = f"{len(keys)} sets with {len(keys)} x {cpu_ms:g} ms of CPU"
    return {
        f"{what}: the CPU alone": min(times["alone"]),
        f"{what}: each set then its CPU": min(times["row"]),
        f"{what}: the sets in a background thread": min(times["background"]),
    }


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def store_round_trips():
    @task
    def measure(**context) -> None:
        import json
        import os
        import platform
        import tempfile
        from pathlib import Path

        import agents
        from upath import UPath

        import airflow
        import airflow.providers.common.ai.durable.core.journal as journal_module
        from airflow.providers.common.ai.durable.airflow.object_storage import cache_path_journal
        from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage
        from airflow.providers.common.ai.durable.core.segments import KeyedSegments, SegmentedStorage

        ti = context["ti"]
        ids = {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id, "map_index": ti.map_index}
        counting = CountingAccessor(context["task_state_store"])
        results = {
            "journal_module": journal_module.__file__,
            "airflow": airflow.__version__,
            "openai_agents": agents.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "round_trip_ms": _round_trips(context["task_state_store"]),
            "rows": [],
        }
        with tempfile.TemporaryDirectory() as folder:
            identity = f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"
            storages = {
                "task state store": (
                    lambda: SegmentedStorage(KeyedSegments(TaskStateStoreStorage(counting, identity))),
                    lambda: sorted(key for key in counting.written if counting.inner.get(key) is not None),
                ),
                "file://": (
                    lambda: cache_path_journal(UPath(f"file://{folder}/cache"), **ids),
                    lambda: sorted(str(path) for path in Path(folder).rglob("*") if path.is_file()),
                ),
            }
            for n in (int(n) for n in os.environ.get("STORE_ROUND_TRIPS_NS", "10,100,400").split(",")):
                results["rows"].extend(_measure(n, storages, counting))
                print(f"store_round_trips: N = {n} measured", flush=True)
        with open(os.environ["STORE_ROUND_TRIPS_OUT"], "w") as out:
            json.dump(results, out, indent=2)

    measure()


dag_object = store_round_trips()
