"""
The store calls of one journal, made off the agent's critical path where the storage allows it.

Every call goes into one queue that one thread works through in order, so a call never overtakes
one asked for before it: a read sees every write queued before it, a key's writes land in the
order they were made, and the storage is never called from two threads at once. A write does not
wait for the store: the agent goes on, and :meth:`JournalIO.settle` waits when it must (before a
model request that carries a tool's result, at the end of a run). A write queued while an earlier
write of the same key still waits replaces it: the store then sees one write, never an older entry
after a newer one. Reads read ahead: :meth:`JournalIO.read_later` queues a read and returns at once.

A storage that must be called from the agent's own thread (``calls_in_background`` false: memory,
``dag.test()``'s in-process task state store) gets every call made at once, in that thread. So does
a read or call that a queued call itself makes (a try's summary, written after a run, reads the
budget): the thread cannot wait for a call queued behind the one it is making. Its writes queue.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from airflow.providers.common.ai.durable.core.storage import JournalStorage

log = logging.getLogger(__name__)

#: How long the thread waits for more calls before it ends (a later call starts a new one).
_IDLE_SECONDS = 2.0
#: How many entries are read in one batch where reads are round trips: a replaying run's reads
#: ahead of its claims, and the reads of a recorded run's calls left in flight.
READ_AHEAD = 8


class _Write:
    def __init__(self, key: str, text: str, done: Callable[[BaseException | None], None]) -> None:
        self.key, self.text, self.done = key, text, done


class _Read:
    def __init__(self, key: str) -> None:
        self.key = key
        self.future: Future[str | None] = Future()


_Call = _Write | _Read | tuple[Future[Any], Callable[[], Any]]


class JournalIO:
    """The calls of one journal to its storage: writes behind the agent, reads ahead of it."""

    def __init__(self, storage: JournalStorage) -> None:
        self.storage = storage
        #: Whether calls are made by a thread of their own (so reading ahead costs the agent nothing).
        self.in_background = storage.calls_in_background
        self._condition = threading.Condition()
        self._queue: deque[_Call] = deque()
        # The writes still queued, by key, so that a newer write of a key replaces the queued one.
        self._queued_writes: dict[str, _Write] = {}
        self._working = False
        self._thread: threading.Thread | None = None

    def _calls_at_once(self) -> bool:
        """Whether a call is made at once, in the caller's thread: no thread of its own, or asked by that thread."""
        return not self.in_background or threading.current_thread() is self._thread

    def write(self, key: str, text: str, done: Callable[[BaseException | None], None]) -> None:
        """
        Store ``text`` under ``key``; ``done`` is called once with the store's error (``None``
        once stored), by the thread that made the store call. A write replaced by a newer one of
        the same key before it was made is never called back.
        """
        if not self.in_background:
            done(_error_of(self.storage.write, key, text))
            return
        with self._condition:
            queued = self._queued_writes.get(key)
            if queued is not None:
                queued.text, queued.done = text, done
                return
            self._queued_writes[key] = write = _Write(key, text, done)
            self._enqueue(write)

    def call(self, function: Callable[[], Any]) -> Any:
        """``function()``, called after every call queued before it; raises what it raises."""
        return self.later(function).result()

    def later(self, function: Callable[[], Any]) -> Future[Any]:
        """``function()``, queued behind every call before it: its future."""
        future: Future[Any] = Future()
        if self._calls_at_once():
            _run_into(future, function)
            return future
        with self._condition:
            self._enqueue((future, function))
        return future

    def read_later(self, key: str) -> Future[str | None]:
        """A read of ``key`` queued now, to be waited for when its entry is needed."""
        return self.reads_later([key])[0]

    def reads_later(self, keys: list[str]) -> list[Future[str | None]]:
        """
        Reads of ``keys`` queued now, together. Reads queued one after the other are made in one
        call of the storage's ``read_many``, up to its ``reads_at_once`` at a time.
        """
        if self._calls_at_once():
            # A write of the key still queued is what the store will hold: the read sees it.
            return [self.later(functools.partial(self._read_at_once, key)) for key in keys]
        reads = [_Read(key) for key in keys]
        with self._condition:
            for read in reads:
                self._enqueue(read)
        return [read.future for read in reads]

    def _read_at_once(self, key: str) -> str | None:
        with self._condition:
            queued = self._queued_writes.get(key)
        return queued.text if queued is not None else self.storage.read(key)

    def has_pending_calls(self) -> bool:
        with self._condition:
            return bool(self._queue) or self._working

    def settle(self) -> None:
        """Wait until every call queued so far has been made (and each write's ``done`` called)."""
        if self._calls_at_once():
            return  # the thread itself made every call queued before the one it is making
        with self._condition:
            self._condition.wait_for(lambda: not self._queue and not self._working)

    def _enqueue(self, item: _Call) -> None:
        self._queue.append(item)
        self._condition.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="durable-journal-io", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            with self._condition:
                self._working = False
                self._condition.notify_all()
                if not self._condition.wait_for(lambda: self._queue, timeout=_IDLE_SECONDS):
                    self._thread = None
                    return
                item = self._queue.popleft()
                if isinstance(item, _Write):
                    del self._queued_writes[item.key]
                reads = [item] if isinstance(item, _Read) else []
                while reads and len(reads) < self.storage.reads_at_once and self._queue:
                    following = self._queue[0]
                    if not isinstance(following, _Read):
                        break
                    reads.append(following)
                    self._queue.popleft()
                self._working = True
            if isinstance(item, _Read):
                self._read_into(reads)
            elif isinstance(item, _Write):
                self._write_now(item)
            else:
                _run_into(*item)

    def _write_now(self, write: _Write) -> None:
        failure: BaseException | None = None
        try:
            self.storage.write(write.key, write.text)
        except BaseException as error:  # reported; this thread goes on with the calls after it
            failure = error
        try:
            write.done(failure)
        except Exception:  # a bug in reporting one write must not stop the writes after it
            log.exception("Durable: reporting a journal write failed key=%s", write.key)

    def _read_into(self, reads: list[_Read]) -> None:
        reads = [read for read in reads if read.future.set_running_or_notify_cancel()]
        if not reads:
            return
        found: list[str | BaseException | None]
        try:
            found = list(self.storage.read_many([read.key for read in reads]))
        except BaseException as error:  # every read gets an answer, or its caller waits forever
            found = [error] * len(reads)
        for read, entry in zip(reads, found, strict=True):
            if isinstance(entry, BaseException):
                read.future.set_exception(entry)
            else:
                read.future.set_result(entry)


def _error_of(write: Callable[[str, str], None], key: str, text: str) -> Exception | None:
    try:
        write(key, text)
    except Exception as error:
        return error
    return None


def _run_into(future: Future[Any], function: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(function())
    except BaseException as error:
        future.set_exception(error)
