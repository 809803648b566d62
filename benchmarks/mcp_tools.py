"""
The journal's cost on an agent run whose tools are on an MCP server: N turns of one model call and
one MCP tool call against an instant scripted model and the tests' real MCP server
(``tests/unit/durable/mcp_servers.py``) in its own process, over stdio and streamable HTTP on
127.0.0.1. Prints the wall time and this process's CPU time of plain ``Runner.run``, a recording
``run_durably`` and a full replay (the server is connected before each run is timed; connecting
is the same in all of them), with ratios and how many tool calls reached the server in each.
"cached" is the replay again with ``cache_tools_list=True``: the SDK lists the server's tools on
every turn unless told to cache them, and a replayed turn lists them too (they are part of what
the model is asked).

Named mcp_tools.py, not mcp.py: a script's folder comes first on sys.path, and a file named mcp.py
would stand in for the mcp package.

Run by hand, not in CI:  python benchmarks/mcp_tools.py
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "unit" / "durable"))

from agents import Agent, Runner
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from agents.testing import ScriptedModel, assistant_message, function_call
from mcp_servers import http_server, stdio_params, tools_called

from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably


def agent(n: int, server: MCPServer, *, answers: bool) -> Agent:
    steps = [[function_call("add", {"a": i, "b": 1}, call_id=f"call_{i}")] for i in range(n)]
    steps.append([assistant_message("done")])
    return Agent(name="bench", model=ScriptedModel(steps if answers else []), mcp_servers=[server])


async def seconds(connect: Callable[[], MCPServer], run: Callable[[MCPServer], Awaitable]) -> tuple[float, float]:
    """The wall time and this process's CPU time of one run (the server's own CPU is not in it)."""
    async with connect() as server:
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        result = await run(server)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.final_output == "done"
    return wall, cpu


async def bench(transport: str, connect: Callable[..., MCPServer], calls: Path, n: int) -> None:
    storage = InMemoryStorage()

    async def durable(server: MCPServer, answers: bool):
        with journal_scope(DurableJournal(storage)):
            return await run_durably(agent(n, server, answers=answers), "go", max_turns=n + 2)

    async def record(server: MCPServer):
        storage.delete_all(())  # each recording run starts from an empty journal; the replay reads it
        return await durable(server, True)

    # Interleaved, best of each: the machine's noise only ever adds time.
    best = {"plain": float("inf"), "record": float("inf"), "replay": float("inf"), "cached": float("inf")}
    best_cpu = dict(best)
    reached = dict.fromkeys(best, 0)
    cached = functools.partial(connect, cache_tools_list=True)
    for _ in range(7):
        for kind, client, run in (
            ("plain", connect, lambda server: Runner.run(agent(n, server, answers=True), "go", max_turns=n + 2)),
            ("record", connect, record),
            ("replay", connect, lambda server: durable(server, False)),
            # The SDK lists the server's tools on every turn, replayed or not, unless told to cache them.
            ("cached", cached, lambda server: durable(server, False)),
        ):
            before = len(tools_called(calls))
            wall, cpu = await seconds(client, run)
            best[kind], best_cpu[kind] = min(best[kind], wall), min(best_cpu[kind], cpu)
            reached[kind] = len(tools_called(calls)) - before
    for measure, times in (("wall", best), ("cpu", best_cpu)):
        print(
            f"{transport:<16}{n:>5}{measure:>6}{times['plain']:>10.3f}{times['record']:>10.3f}{times['replay']:>10.3f}"
            f"{times['cached']:>10.3f}{times['record'] / times['plain']:>12.2f}"
            f"{times['replay'] / times['plain']:>12.2f}{times['cached'] / times['plain']:>12.2f}"
            f"{reached['plain']:>14}{reached['record']:>8}{reached['replay']:>8}"
        )


def main() -> None:
    # Per-step log lines would time the console, not the journal.
    logging.disable(logging.INFO)
    print(
        f"{'transport':<16}{'N':>5}{'':>6}{'plain s':>10}{'record s':>10}{'replay s':>10}{'cached s':>10}"
        f"{'record/run':>12}{'replay/run':>12}{'cached/run':>12}{'calls: plain':>14}{'record':>8}{'replay':>8}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for n in (10, 50):
            stdio_calls = Path(folder, f"stdio-{n}.jsonl")
            stdio = functools.partial(MCPServerStdio, params=stdio_params(stdio_calls), name="bench")
            asyncio.run(bench("stdio", stdio, stdio_calls, n))
            http_calls = Path(folder, f"http-{n}.jsonl")
            with http_server("streamable-http", http_calls) as server:
                http = functools.partial(MCPServerStreamableHttp, params={"url": server.url}, name="bench")
                asyncio.run(bench("streamable-http", http, http_calls, n))


if __name__ == "__main__":
    main()
