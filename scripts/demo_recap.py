"""
The recap scripts/demo.sh prints after an example's run: python scripts/demo_recap.py LOG [EXIT_CODE]

From the whole log of ``python example_dags/<example>.py`` it keeps the lines that tell the story
(each try's start, the model requests, the tools, each ``Durable:`` line, why a try failed and the
agent's answer), without the timestamp and logger decorations of either Airflow line's format,
each once: Airflow 2.11 writes a task's log lines twice to the console (the task's handler and
the root logger's). It exits with EXIT_CODE (the example's own) after saying, when it is not 0,
that the DAG run failed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator

_STORY = re.compile(r"\[DAG TEST\] starting|Tool .* ran|HTTP Request|Durable:|Task failed|Agent .* answered")
# Airflow 3: "2026-01-01T00:00:00.000000Z [info     ] message [logger] loc=file.py:12 key=value".
_AIRFLOW_3 = re.compile(r"^\S+ \[[a-z ]+\] (?P<message>.*?)(?: +\[[^]]+\](?: +loc=.*| *))?$")
# Airflow 2.11: "[2026-01-01T00:00:00.000+0000] {file.py:12} INFO - message".
_AIRFLOW_2 = re.compile(r"^\[[^]]+\] \{[^}]+\} [A-Z]+ - (?P<message>.*)$")
# The last line of a traceback: "package.module.Error: what it says" (or a bare "Error").
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Timeout|Interrupt|Exit)\b(?::.*)?$")


def message_of(line: str) -> str:
    """The message of a log line, without the timestamp, level, logger and location around it."""
    line = line.rstrip("\n")
    for pattern in (_AIRFLOW_3, _AIRFLOW_2):
        if match := pattern.match(line):
            return match.group("message").rstrip()
    return line.rstrip()


def _is_log_record(line: str) -> bool:
    return bool(_AIRFLOW_3.match(line) or _AIRFLOW_2.match(line))


def recap(lines: Iterable[str]) -> Iterator[str]:
    """The story lines of the log, each once, a failed try's line with the exception that failed it."""
    lines = [line.rstrip("\n") for line in lines]
    seen_in_this_try: set[str] = set()
    for number, line in enumerate(lines):
        message = message_of(line)
        if not _STORY.search(message):
            continue
        if "[DAG TEST] starting" in message:
            seen_in_this_try = set()
        if message.startswith("Task failed") and (reason := _failure_reason(lines[number + 1 :])):
            message = f"{message}: {reason}"
        # A line repeated within one try is Airflow 2.11's second copy, not a second event: each
        # event of a try (a step at its position, a request's status, a tool's line) is logged once.
        if message in seen_in_this_try and not message.startswith("HTTP Request"):
            continue
        seen_in_this_try.add(message)
        yield message


def _failure_reason(following: list[str]) -> str | None:
    """The exception line closing the traceback that follows a 'Task failed' record, if any."""
    reason = None
    for line in following:
        if _is_log_record(line):
            break
        stripped = line.strip()
        if line[:1] not in (" ", "\t") and _EXCEPTION.match(stripped):
            reason = stripped
    if reason is not None and len(reason) > 200:
        reason = reason[:197] + "..."
    return reason


def main(argv: list[str]) -> int:
    log_path = argv[1]
    exit_code = int(argv[2]) if len(argv) > 2 else 0
    with open(log_path, encoding="utf-8", errors="replace") as log:
        story = list(recap(log))
    print()
    print(f"What happened (the whole log: {log_path}):")
    print("\n".join(story) if story else "(no line of the story: the log above says why)")
    if not any(line.startswith("Durable:") for line in story):
        print("No 'Durable:' line: no durable step ran; the log above says why.")
    if exit_code != 0:
        print(
            f"demo: the DAG run failed (the example exited with {exit_code}); the lines above say why.", file=sys.stderr
        )
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
