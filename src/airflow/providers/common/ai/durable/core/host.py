"""
What the journal core needs of the system it runs in, as one typed interface: :class:`Host`.

The core knows no task system. A :class:`Host` says what it would otherwise have to ask one: the
Fernet keys stored text is encrypted with, the secrets masker, the exception that fails a task for
good, whether a person can be asked, the deployment's model prices, who watches the steps, the
journal of the running task, and, for one journal, the try it is bound to, the first try its
budget counts and what runs after each of its runs. Wording a user reads that names the system's
own settings or entry points comes from it too (:class:`HostWording`).

A journal is given its host when it is built (``DurableJournal(storage, host=...)``). Code that
runs outside any journal (masking a text for a page, decrypting a journal to export it, checking
an ``in_flight`` policy as a DAG is parsed) uses :func:`current_host`: the host of an enclosing
:func:`hosting` block, else the default of the process (:func:`use_by_default`, registered once
by the package that binds the core to its system, for Airflow the ``durable`` package, and built
on first use), else :data:`PLAIN_HOST`, the host
of the core used alone: no keys, nothing masked, ``RuntimeError`` for failures, no listeners.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core.events import emit_to

if TYPE_CHECKING:
    from airflow.providers.common.ai.durable.core.journal import DurableJournal
    from airflow.providers.common.ai.durable.core.prices import ModelPrice


def _no_keys() -> str:
    return ""


def _as_it_is(value: Any) -> Any:
    return value


def _nothing_redacted() -> Callable[[Any], Any]:
    return _as_it_is


def _asking_supported() -> str | None:
    return None


def _no_prices() -> dict[str, ModelPrice]:
    return {}


def _no_journal() -> DurableJournal | None:
    return None


@dataclass(frozen=True)
class HostWording:
    """The parts of the core's messages that name the system's own settings and entry points."""

    #: How to tell apart runs that ask the same (names the entry point's argument).
    tell_runs_apart: str = "give each its own key (DurableJournal.run(key=...))"
    #: Where a deployment sets the price of a model (names the setting).
    prices_setting: str = "the host's price_overrides"
    #: Where ``current_idempotency_key()`` works (names the entry points that run tool calls durably).
    durable_tool_call: str = "a tool call of a durable run"
    #: Who can ask a person about a call found in flight (the end of "which only ... can ask a person about").
    asks_a_person: str = "a journal whose host has an approval desk"
    #: The Fernet key setting, as a user sets it.
    key_setting: str = "the Fernet key setting"
    #: Where a Fernet key must be set (the end of "set a Fernet key ...").
    where_keys_are_set: str = "wherever the journal is read and written"
    #: How to get a journal file anew (the end of a message about one that cannot be read).
    export_again: str = "export it again"


@dataclass(frozen=True)
class Host:
    """
    What the core asks of the system it runs in; every field has the plain answer of the core used
    alone. A binding builds one with its system's answers, and one per journal with
    :func:`dataclasses.replace` for the journal's try (:meth:`for_try`).
    """

    #: The Fernet key setting: keys separated by commas, the first encrypts; ``""`` for none.
    fernet_key_setting: Callable[[], str] = _no_keys
    #: What a key setting that is not a list of Fernet keys raises.
    invalid_key_error: type[Exception] = ValueError
    #: Returns the secrets masker's ``redact`` (a value with every secret the system knows replaced).
    secrets_redactor: Callable[[], Callable[[Any], Any]] = _nothing_redacted
    #: The exception that fails a task for good (no retry).
    failing_error: type[Exception] = RuntimeError
    #: Why a person cannot be asked on this system (the end of "the policy 'ask' ..."), or ``None``.
    asking_unsupported: Callable[[], str | None] = _asking_supported
    #: The prices a deployment set per model name; raises where they cannot be read.
    price_overrides: Callable[[], dict[str, ModelPrice]] = _no_prices
    #: Called with each step event and budget refusal (``core/events.py``).
    listeners: tuple[Callable[[Any], None], ...] = ()
    #: The journal bound to the running task, opened if need be; ``None`` outside a task.
    journal_of_running_task: Callable[[], DurableJournal | None] = _no_journal
    #: The journal bound to the running task if one was opened in this try; never opens one.
    bound_journal_of_running_task: Callable[[], DurableJournal | None] = _no_journal
    #: The try a journal is bound to, and the first try its budget counts (a clear of a finished
    #: task instance starts a new budget).
    try_number: int = 1
    budget_first_try: int = 1
    #: Called with the journal after each top-level run ends, however it ends.
    after_each_run: Callable[[DurableJournal], None] | None = None
    wording: HostWording = field(default_factory=HostWording)

    def for_try(
        self,
        try_number: int,
        *,
        budget_first_try: int = 1,
        after_each_run: Callable[[DurableJournal], None] | None = None,
    ) -> Host:
        """This host, for a journal bound to try ``try_number``."""
        return dataclasses.replace(
            self, try_number=try_number, budget_first_try=budget_first_try, after_each_run=after_each_run
        )

    def redact(self, text: str) -> Any:
        """``text`` with every secret the system's masker knows replaced (a str comes back a str)."""
        return _redactor_of(self.secrets_redactor)(text)

    def emit(self, event: Any) -> None:
        """Hand ``event`` to every listener; one that raises is logged at DEBUG and never disturbs the run."""
        emit_to(self.listeners, event)


@functools.lru_cache(maxsize=16)
def _redactor_of(secrets_redactor: Callable[[], Callable[[Any], Any]]) -> Callable[[Any], Any]:
    # Looked up once per masker: Airflow's compat module resolves each attribute access anew.
    return secrets_redactor()


#: The host of the core used alone.
PLAIN_HOST = Host()

_hosted: ContextVar[Host | None] = ContextVar("durable_host", default=None)
#: The default host of the process, or the function that builds it on first use.
_default: list[Host | Callable[[], Host]] = []


def current_host() -> Host:
    """The host of an enclosing :func:`hosting` block, else the process's default, else :data:`PLAIN_HOST`."""
    host = _hosted.get()
    if host is not None:
        return host
    if not _default:
        return PLAIN_HOST
    found = _default[0]
    if not isinstance(found, Host):
        # Two threads may both build it: a binding returns the one host it defines.
        found = _default[0] = found()
    return found


@contextlib.contextmanager
def hosting(host: Host) -> Iterator[Host]:
    """Make ``host`` the current host inside this block (for this thread or task)."""
    token = _hosted.set(host)
    try:
        yield host
    finally:
        _hosted.reset(token)


def use_by_default(host: Host | Callable[[], Host]) -> None:
    """
    Make ``host`` the default of this process, for code outside any :func:`hosting` block: the
    package that binds the core to a system calls it once. Given a function, the host is built by
    it the first time one is needed, so that registering it runs nothing of the system. A second,
    other default is refused.
    """
    if _default and _default[0] is not host:
        raise ValueError(f"the process already has a default host: {_default[0]!r}")
    _default[:] = [host]
