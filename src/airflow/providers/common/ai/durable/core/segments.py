"""
A journal's entries as records appended to segments: a step costs one bounded write, and a
clean-up one delete a segment (how entries are stored; what an entry holds is unchanged).

A record is a header line, ``<CRC-32 of key and text, 8 hex digits> <length of the text in
bytes> <key>``, then the text in UTF-8 and a newline. A segment is records one after the other;
reading one stops at the first record that is not whole or whose checksum does not match (a try
killed mid-append leaves a torn tail), and every record before it is read. A later record of a
key replaces an earlier one, in a segment and across segments, which are read in number order.

Where a segment can be appended to in place (a file on local disk), a try appends every record
to a segment of its own, sealed when the try ends. Elsewhere (the task state store, an object
store) each write stores the segment it adds to whole, so a segment is closed once it holds
:data:`SEGMENT_BYTES` and the next record opens a new one.

Entries an earlier release stored one under each key (formats 2 to 7) are read where no segment
holds the key, and deleted with the segments.
"""

from __future__ import annotations

import logging
import re
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from itertools import count

from airflow.providers.common.ai.durable.core.entries import INDEX_KEY, snapshot_key
from airflow.providers.common.ai.durable.core.storage import JournalStorage

log = logging.getLogger(__name__)

#: What a segment's name starts with where it sits beside entries of one key each; no entry's key does.
SEGMENT_NAME = "segment-"
#: Where each write stores its segment whole, the size at which a segment is closed.
SEGMENT_BYTES = 32 * 1024

_HEADER = re.compile(rb"([0-9a-f]{8}) ([0-9]{1,15}) ([!-~]{1,200})\n")


def segment_name(number: int) -> str:
    return f"{SEGMENT_NAME}{number}"


def segment_number(name: str) -> int | None:
    """The number of the segment ``name`` names, or ``None`` if it names no segment."""
    number = name.removeprefix(SEGMENT_NAME)
    return int(number) if name.startswith(SEGMENT_NAME) and number.isascii() and number.isdigit() else None


def record(key: str, text: str) -> bytes:
    """The record of ``text`` under ``key``, as a segment holds it."""
    data = text.encode("utf-8", "surrogatepass")
    name = key.encode("ascii")
    return b"%08x %d %s\n%s\n" % (zlib.crc32(data, zlib.crc32(name + b"\n")), len(data), name, data)


def records_of(segment: bytes) -> tuple[list[tuple[str, str]], int]:
    """The whole records of ``segment`` in order, as (key, text), and the offset where they end."""
    found: list[tuple[str, str]] = []
    offset = 0
    while offset < len(segment):
        header = _HEADER.match(segment, offset)
        if header is None:
            break
        start = header.end()
        end = start + int(header[2])
        data = segment[start:end]
        if segment[end : end + 1] != b"\n" or zlib.crc32(data, zlib.crc32(header[3] + b"\n")) != int(header[1], 16):
            break
        found.append((header[3].decode("ascii"), data.decode("utf-8", "surrogatepass")))
        offset = end + 1
    return found, offset


class SegmentPlace(ABC):
    """Where one task instance's segments are kept, beside the entries older releases kept there one a key."""

    identity: str
    calls_in_background: bool = False
    #: Whether a record is appended to its segment in place; else each write stores the segment whole.
    appends: bool = False
    #: The entries older releases stored here, one under each key.
    legacy: JournalStorage

    @abstractmethod
    def segments(self) -> dict[int, bytes]:
        """Every segment stored, by number."""

    @abstractmethod
    def store(self, number: int, segment: bytes, record: bytes) -> None:
        """Store segment ``number``, which now ends with ``record``: append ``record``, or store ``segment`` whole."""

    def seal(self) -> None:
        """The segment appended to gets no more records (a place that appends closes it)."""
        return

    def store_whole(self, number: int, segment: bytes) -> None:
        """Replace sealed segment ``number`` with ``segment`` in one atomic write (a place that appends)."""
        raise NotImplementedError

    @abstractmethod
    def delete_all(self, numbers: list[int], legacy_keys: list[str]) -> None:
        """Delete segments ``numbers``, any other segment if the place can list them, and ``legacy_keys``."""


class SegmentedStorage(JournalStorage):
    """
    A journal's entries as records in the segments of ``place`` (see the module's docstring).

    The first call reads every segment, in one round trip where the place reads several at once;
    reads are then answered from what was read. A journal on it keeps no snapshots of its runs.
    """

    whole_journal_at_once = True

    def __init__(self, place: SegmentPlace, *, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.place = place
        self.identity = place.identity
        self.calls_in_background = place.calls_in_background
        self._segment_bytes = segment_bytes
        self._lock = threading.RLock()
        # Every entry the segments hold, by key; None until read.
        self._texts: dict[str, str] | None = None
        # Whether the place holds entries of one key each (an older release's), and those read.
        self._legacy = False
        self._legacy_read: set[str] = set()
        self._numbers: list[int] = []
        # The segment this storage adds to (0: none yet, or sealed), the keys it holds (their records
        # where it is stored whole), and how many records were added to it.
        self._number = 0
        self._records: dict[str, bytes | None] = {}
        self._appended = 0

    def _loaded(self) -> dict[str, str]:
        with self._lock:
            if self._texts is None:
                segments = self.place.segments()
                texts: dict[str, str] = {}
                for number in sorted(segments):
                    records, end = records_of(segments[number])
                    if end < len(segments[number]):
                        log.info(
                            "Durable: a segment of the journal ends in a record that is not whole (a try ended while "
                            "writing it); the records before it are read segment=%s records=%s",
                            number,
                            len(records),
                        )
                    texts.update(records)
                self._numbers = sorted(segments)
                # An older release's journal always holds its index or its first run's first entry.
                self._legacy = any(found is not None for found in self.place.legacy.read_many([INDEX_KEY, "1.1"]))
                self._texts = texts
            return self._texts

    def read(self, key: str) -> str | None:
        found = self.read_many([key])[0]
        if isinstance(found, Exception):
            raise found
        return found

    def read_many(self, keys: list[str]) -> list[str | Exception | None]:
        with self._lock:
            texts = self._loaded()
            found: list[str | Exception | None] = [texts.get(key) for key in keys]
            missing = [n for n, key in enumerate(keys) if found[n] is None] if self._legacy else []
            if missing:
                for n, text in zip(missing, self.place.legacy.read_many([keys[n] for n in missing]), strict=True):
                    found[n] = text
                    if text is not None:
                        self._legacy_read.add(keys[n])
            return found

    def write(self, key: str, text: str) -> None:
        added = record(key, text)
        appends = self.place.appends
        with self._lock:
            texts = self._loaded()
            if not appends and self._records and self._size_with(key, added) > self._segment_bytes:
                self._number = 0
            if not self._number:
                self._number = max(self._numbers, default=0) + 1
                self._numbers.append(self._number)
                self._records, self._appended = {}, 0
            # The open segment's latest record of each key, the last written last (bytes where stored whole).
            had = key in self._records
            previous = self._records.pop(key, None)
            self._records[key] = None if appends else added
            try:
                self._store(added)
            except BaseException:
                del self._records[key]
                if had:
                    self._records[key] = previous
                if appends:
                    self._appended += 1  # what was appended may be torn: the segment is written again as it seals
                    self.seal()
                raise
            texts[key] = text
            self._appended += 1
            if not appends and sum(map(len, filter(None, self._records.values()))) >= self._segment_bytes:
                self._number = 0

    def _store(self, added: bytes) -> None:
        while True:
            try:
                whole = b"" if self.place.appends else b"".join(filter(None, self._records.values()))
                self.place.store(self._number, whole, added)
                return
            except FileExistsError:
                if self._appended:
                    raise
                # A new segment's name another process (a try still running) took: the next one.
                self._number = max(self._numbers) + 1
                self._numbers.append(self._number)

    def _size_with(self, key: str, added: bytes) -> int:
        return sum(len(stored) for name, stored in self._records.items() if stored and name != key) + len(added)

    def seal(self) -> None:
        with self._lock:
            number, records, appended = self._number, self._records, self._appended
            self._number, self._records, self._appended = 0, {}, 0
            self.place.seal()
            if self.place.appends and number and appended > len(records):
                # Records replaced since (in-flight marks, start marks) or torn: the segment again, each key's last.
                texts = self._texts or {}
                try:
                    self.place.store_whole(number, b"".join(record(key, texts[key]) for key in records if key in texts))
                except OSError as error:
                    log.info(
                        "Durable: a segment of the journal could not be compacted; it is read as it is reason=%r",
                        str(error),
                    )

    def delete_all(self, keys: Iterable[str]) -> None:
        with self._lock:
            self._loaded()
            legacy: list[str] = []
            if self._legacy:
                # Any key may be one an older release stored too, overridden since by a record.
                legacy = sorted({*keys, *self._legacy_read})
                # The snapshots an older release kept of its top-level runs, beside their entries.
                legacy += [snapshot_key(key[:-2]) for key in legacy if key.endswith(".1") and key.count(".") == 1]
            self.seal()
            self.place.delete_all(self._numbers, legacy)
            self._texts, self._numbers, self._legacy, self._legacy_read = {}, [], False, set()

    def stored_texts(self) -> dict[str, str]:
        texts = {key: text for key, text in self.place.legacy.stored_texts().items() if segment_number(key) is None}
        for _, segment in sorted(self.place.segments().items()):
            texts.update(records_of(segment)[0])
        return texts


class KeyedSegments(SegmentPlace):
    """Segments kept as entries of ``store``, each stored whole under its :func:`segment_name`."""

    def __init__(self, store: JournalStorage) -> None:
        self.legacy = store
        self.identity = store.identity
        self.calls_in_background = store.calls_in_background

    def segments(self) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        batch = max(1, self.legacy.reads_at_once)
        for first in count(1, batch):
            numbers = range(first, first + batch)
            for number, text in zip(numbers, self.legacy.read_many([segment_name(n) for n in numbers]), strict=True):
                if isinstance(text, Exception):
                    raise text
                if text is None:
                    return found
                found[number] = text.encode("utf-8", "surrogatepass")
        raise AssertionError("unreachable")  # pragma: no cover

    def store(self, number: int, segment: bytes, record: bytes) -> None:
        self.legacy.write(segment_name(number), segment.decode("utf-8", "surrogatepass"))

    def delete_all(self, numbers: list[int], legacy_keys: list[str]) -> None:
        self.legacy.delete_all([*map(segment_name, numbers), *legacy_keys])
