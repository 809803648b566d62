"""
A run's progress in the task log (R-38): a live step's line as it completes, and a stretch of
consecutive replayed steps as one line when the stretch ends (an adapter calls :meth:`flush` as
a live call starts, before the call's own log lines; and as the run ends, however it ends), so
that a replay of hundreds of steps is a line, not hundreds.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from airflow.providers.common.ai.durable.core.plural import counted

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.steps import JournalStep

#: How many names of a kind a stretch's line shows before "and N more".
_NAMES_SHOWN = 5

_NOUNS = {"model": "model call", "tool": "tool call"}


class ProgressLog:
    """The progress lines of one run, written to ``logger``; an adapter hands it each step as it completes."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._stretch: list[JournalStep] = []

    def step_done(self, step: JournalStep) -> None:
        """``step`` completed: replayed, it joins the stretch; live, the stretch so far is logged, then it."""
        if step.replayed and step.failure is None:
            self._stretch.append(step)
            return
        self.flush()
        if step.failure is not None:
            self._log.info(
                "Durable: %s ran live and failed, so it runs again next try reason=%r", step.describe(), step.failure
            )
        else:
            self._log.info("Durable: %s ran live", step.describe())

    def flush(self) -> None:
        """Log the stretch of replayed steps not logged yet: the run ended, or a live step follows."""
        stretch, self._stretch = self._stretch, []
        if len(stretch) == 1:
            self._log.info("Durable: %s replayed", stretch[0].describe())
        elif stretch:
            self._log.info("Durable: replayed steps %s to %s: %s", stretch[0].key, stretch[-1].key, _what(stretch))


def _what(stretch: list[JournalStep]) -> str:
    """``2 model calls ('gpt-4.1'), 1 tool call ('refund')``: each kind, counted, with the names it had."""
    names: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for step in stretch:
        counts[step.kind] = counts.get(step.kind, 0) + 1
        if step.name not in names.setdefault(step.kind, []):
            names[step.kind].append(step.name)
    parts = []
    for kind, number in counts.items():
        shown = ", ".join(repr(name) for name in names[kind][:_NAMES_SHOWN])
        more = len(names[kind]) - _NAMES_SHOWN
        if more > 0:
            shown += f" and {more} more"
        parts.append(f"{counted(number, _NOUNS.get(kind, f'{kind} step'))} ({shown})")
    return ", ".join(parts)
