"""
A recorded run as a test fixture: :func:`replay_offline` runs an agent against a journal file
(``airflow common-ai journal export``) with no model server and no network.

Each model answer and tool result comes from the file, matched by the journal as a retry matches
it. The first call that asks something else is the divergence, named as the task log names it
(the model, the instructions, the first input item that differs, the tool, the argument); then
``strict=True`` stops the run there, and ``strict=False`` hands that call and the rest to the
``model`` the test gives (an ``agents.testing.ScriptedModel``, say), the tools running as they are.

    def test_the_new_prompt_still_triages_the_recorded_ticket():
        replay = replay_offline(triage_agent, "Triage ticket T-5.", "tests/fixtures/triage.json")
        assert replay.divergence is None, replay.divergence
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, Model, ModelProvider, RunConfig, RunResult
from agents.models import get_default_model

from airflow.providers.common.ai.durable.core import fingerprint
from airflow.providers.common.ai.durable.core.host import current_host, hosting
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.journal_file import JournalFile, fingerprint_key_of, read_journal_file
from airflow.providers.common.ai.durable.core.scope import journal_scope
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage
from airflow.providers.common.ai.durable.openai_agents import run_durably_sync


class ReplayStopped(Exception):
    """A strict offline replay met a call that the file does not hold: it stops there."""


@dataclass(frozen=True)
class Divergence:
    """The first call of the run that did not line up with the file: its key, the call, and why."""

    key: str
    step: str
    reason: str

    def __str__(self) -> str:
        return f"{self.step}: {self.reason}"


@dataclass
class OfflineReplay:
    """What an offline replay did: the run's result (``None`` once a strict replay stopped), and each step."""

    result: RunResult | None
    #: The keys of the steps that replayed from the file, and of those that ran (on the test's model or tools).
    replayed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    #: The first divergence, ``None`` when every call lined up with the file.
    divergence: Divergence | None = None
    #: Whether a strict replay stopped at the divergence.
    stopped: bool = False
    #: How many steps the file holds.
    recorded: int = 0

    @property
    def replayed_everything(self) -> bool:
        """Whether every step of the run replayed and the run used every step of the file."""
        return self.divergence is None and not self.live and len(self.replayed) == self.recorded


class _Offline(Model):
    """A model named as the recorded one, which never reaches a server: the test's model answers, or the run stops."""

    def __init__(self, name: str, fallback: Model | None) -> None:
        self.model = name
        self.fallback = fallback

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.fallback is None:
            raise ReplayStopped(f"model {self.model!r} was asked something the journal file does not hold")
        return await self.fallback.get_response(*args, **kwargs)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.fallback is None:
            raise ReplayStopped(f"model {self.model!r} was asked something the journal file does not hold")
        return self.fallback.stream_response(*args, **kwargs)


class _OfflineProvider(ModelProvider):
    def __init__(self, fallback: Model | None) -> None:
        self.fallback = fallback

    def get_model(self, model_name: str | None) -> Model:
        return _Offline(model_name or get_default_model(), self.fallback)


def _stopping(tool: Any) -> Any:
    """A function tool that stops a strict replay when it would run (its result is not in the file)."""
    if not isinstance(tool, FunctionTool):
        return tool

    async def invoke(context: Any, arguments: str) -> Any:
        raise ReplayStopped(f"tool {tool.name!r} was called with what the journal file does not hold")

    return dataclasses.replace(tool, on_invoke_tool=invoke)


def _offline_agent(agent: Agent[Any], fallback: Model | None, strict: bool, seen: dict[int, Agent[Any]]) -> Agent[Any]:
    """``agent`` and the agents it hands off to, each with a model of its name that reaches no server."""
    if id(agent) in seen:
        return seen[id(agent)]
    changes: dict[str, Any] = {}
    if isinstance(agent.model, Model):
        changes["model"] = _Offline(str(getattr(agent.model, "model", None) or type(agent.model).__name__), fallback)
    if strict:
        changes["tools"] = [_stopping(tool) for tool in agent.tools]
    copy = seen[id(agent)] = agent.clone(**changes)
    copy.handoffs = [
        _offline_agent(handoff, fallback, strict, seen) if isinstance(handoff, Agent) else handoff
        for handoff in agent.handoffs
    ]
    return copy


@contextlib.contextmanager
def fingerprinted_with(fernet_key: str | None) -> Iterator[None]:
    """
    Fingerprints taken under ``fernet_key`` (that of the deployment that recorded a journal file)
    while it lasts; under the test's own key when ``None``.
    """
    if fernet_key is None:
        yield
        return
    # Fingerprint keys are derived by the key's value: nothing cached needs clearing.
    with hosting(dataclasses.replace(current_host(), fernet_key_setting=lambda: fernet_key)):
        yield


def check_fingerprint_key(journal_file: JournalFile) -> None:
    """Refuse ``journal_file`` when its calls were fingerprinted under another key than the test's, naming the fix."""
    current = fingerprint_key_of(fingerprint.fingerprint_of_json("{}"))
    if journal_file.fingerprint_key is not None and journal_file.fingerprint_key != current:
        raise ValueError(
            f"the journal file's calls were fingerprinted under {journal_file.fingerprint_key!r} and this test "
            f"fingerprints under {current!r}: give replay_offline(fernet_key=...) the [core] fernet_key of the "
            "deployment that recorded it, or record the fixture where [core] fernet_key is what the test has"
        )


def load_journal_file(path: str | Path) -> JournalFile:
    """The journal file at ``path``; refuses one that is truncated or of another schema, naming the fix."""
    return read_journal_file(Path(path).read_text(encoding="utf-8"), name=str(path))


def replay_offline(
    agent: Agent[Any],
    input: Any,
    journal_file: str | Path | JournalFile,
    *,
    strict: bool = True,
    model: Model | None = None,
    fernet_key: str | None = None,
    durable_key: str | None = None,
    **run_kwargs: Any,
) -> OfflineReplay:
    """
    Run ``agent`` on ``input`` as ``run_durably_sync`` does, against ``journal_file`` (a path or a
    :class:`JournalFile`), with no model server and no network; return what replayed and where the
    run diverged, and why.

    ``strict=True`` stops at the first call the file does not hold (``stopped``, no ``result``);
    ``strict=False`` hands it and every later call to ``model`` (required then) and to the tools.
    ``fernet_key``: the ``[core] fernet_key`` of the deployment that recorded the file, when it is
    not the test's own (fingerprints are keyed by it). Other keyword arguments go to the run
    (``max_turns``, ``context``, a ``run_config``, whose model provider is replaced).
    """
    if not strict and model is None:
        raise ValueError("replay_offline(strict=False) needs a model= for the calls the file does not hold")
    journal_file = journal_file if isinstance(journal_file, JournalFile) else load_journal_file(journal_file)
    task = journal_file.task_instance
    storage = InMemoryStorage(
        f"{task.get('dag_id')}/{task.get('run_id')}/{task.get('task_id')}/{task.get('map_index')}"
    )
    storage.entries.update(journal_file.entries())
    fallback = None if strict else model
    run_config = run_kwargs.pop("run_config", None) or RunConfig()
    run_config = dataclasses.replace(run_config, model_provider=_OfflineProvider(fallback), tracing_disabled=True)
    offline = _offline_agent(agent, fallback, strict, {})
    result: RunResult | None = None
    stopped = False
    with fingerprinted_with(fernet_key):
        check_fingerprint_key(journal_file)
        journal = DurableJournal(storage)
        with journal_scope(journal):
            try:
                result = run_durably_sync(offline, input, durable_key=durable_key, run_config=run_config, **run_kwargs)
            except Exception as error:
                if not _stopped_by(error):
                    raise
                stopped = True
    steps = journal.claimed_steps()
    divergences = journal.stats.divergences
    return OfflineReplay(
        result=result,
        replayed=[step.key for step in steps if step.replayed],
        live=[step.key for step in steps if not step.replayed],
        divergence=Divergence(*divergences[0]) if divergences else None,
        stopped=stopped,
        recorded=len(journal_file.steps),
    )


def _stopped_by(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, ReplayStopped):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False
