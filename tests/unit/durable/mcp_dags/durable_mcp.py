"""
A durable ``@task`` whose agents use real MCP servers (``../mcp_servers.py``): the triage agent
adds over stdio, then hands off to the mailer, whose tools are on a streamable HTTP server. The
HTTP server's ``broken`` tool fails its first call, and the mailer's server raises tool errors
(``failure_error_function=None``), so try 1 fails there and Airflow retries the task.

Environment: FAKE_OPENAI_BASE_URL (the model endpoint), MCP_SERVER_SCRIPT, MCP_STDIO_CALLS (the
call log of the stdio server, which each try starts anew), MCP_HTTP_URL.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import datetime, timedelta

from airflow.providers.common.compat.sdk import dag, task

#: Seconds the MCP clients wait for a server, as in ``mcp_servers.CONNECT_TIMEOUT`` (this file runs
#: under Airflow, apart from the tests): the SDK's 5 s is short for a process start under load.
CONNECT_TIMEOUT = 60


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def durable_mcp():
    @task(retries=1, retry_delay=timedelta(seconds=0))
    def mail_the_sum() -> str:
        from agents import Agent, OpenAIChatCompletionsModel
        from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
        from openai import AsyncOpenAI

        from airflow.providers.common.ai.durable.openai_agents import run_durably

        async def main() -> str:
            calculator = MCPServerStdio(
                params={
                    "command": sys.executable,
                    "args": [os.environ["MCP_SERVER_SCRIPT"], "stdio"],
                    "env": {"MCP_CALLS": os.environ["MCP_STDIO_CALLS"]},
                },
                name="calculator",
                client_session_timeout_seconds=CONNECT_TIMEOUT,
            )
            mail = MCPServerStreamableHttp(
                params={"url": os.environ["MCP_HTTP_URL"]},
                name="mail",
                failure_error_function=None,
                client_session_timeout_seconds=CONNECT_TIMEOUT,
            )
            async with calculator, mail:
                client = AsyncOpenAI(base_url=os.environ["FAKE_OPENAI_BASE_URL"], api_key="x", max_retries=0)
                model = OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)
                mailer = Agent(name="mailer", model=model, mcp_servers=[mail])
                triage = Agent(name="triage", model=model, mcp_servers=[calculator], handoffs=[mailer])
                result = await run_durably(triage, "Add 2 and 3, then mail the sum.")
                return result.final_output

        return asyncio.run(main())

    mail_the_sum()


dag_object = durable_mcp()

if __name__ == "__main__":
    dag_object.test()
