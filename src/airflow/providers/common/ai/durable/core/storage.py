"""Where a journal's entries are kept: the interface every backend implements, and one in memory."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable


class JournalStorage(ABC):
    """
    The entries of one task instance's journal, each a JSON text under a short key.

    Backends know nothing about agents or about what an entry holds. Keys are made of digits and
    dots; a backend maps them to its own names so that they cannot clash with anything else it keeps.
    """

    #: Names the task instance in idempotency keys; the same on every try of that task instance.
    identity: str

    #: Whether the journal may make this storage's calls from a thread of its own, one call at a
    #: time, so that the agent does not wait on each round trip (see ``journal_io.py``).
    calls_in_background: bool = False

    #: How many reads one :meth:`read_many` call may make at once; 1 where they would be made one
    #: by one anyway (each then answers as soon as it is read).
    reads_at_once: int = 1

    #: Whether the first call reads every entry, and later reads cost no round trip (``segments.py``):
    #: a journal then keeps no snapshots of its runs.
    whole_journal_at_once: bool = False

    @abstractmethod
    def read(self, key: str) -> str | None:
        """Return the entry stored under ``key``, or ``None`` if there is none."""

    def read_many(self, keys: list[str]) -> list[str | Exception | None]:
        """
        The entries under ``keys``, in order: each the entry, ``None`` if there is none, or the
        error reading it. A backend that can read several at once (concurrently) overrides it,
        and says how many in :attr:`reads_at_once`.
        """
        found: list[str | Exception | None] = []
        for key in keys:
            try:
                found.append(self.read(key))
            except Exception as error:
                found.append(error)
        return found

    @abstractmethod
    def write(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` in one atomic write, replacing what was there."""

    @abstractmethod
    def delete_all(self, keys: Iterable[str]) -> None:
        """
        Delete the whole journal.

        ``keys`` lazily names every stored entry, found by reading the journal; a backend that can
        drop everything it holds in one call ignores it.
        """

    def seal(self) -> None:
        """The try ends: what it wrote is complete (a storage that appends closes what it appends to)."""
        return

    def stored_texts(self) -> dict[str, str]:
        """
        Every entry stored, by key: for a reader outside the try (the journal page, the CLI), which
        knows no key to ask for. A backend that cannot list what it holds (a task's own view of the
        task state store) refuses.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list its entries: read them by key")


class InMemoryStorage(JournalStorage):
    """Entries in a dict, for tests and for runs outside Airflow."""

    def __init__(self, identity: str = "in-memory") -> None:
        self.identity = identity
        self.entries: dict[str, str] = {}

    def read(self, key: str) -> str | None:
        return self.entries.get(key)

    def write(self, key: str, text: str) -> None:
        self.entries[key] = text

    def delete_all(self, keys: Iterable[str]) -> None:
        self.entries.clear()

    def stored_texts(self) -> dict[str, str]:
        return dict(self.entries)
