"""
The journal under ``[common.ai] durable_cache_path``, in any fsspec filesystem: segments appended
to in place on local disk, segments stored whole elsewhere (``core/segments.py``), and the
entries older releases stored one object each.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from fsspec.implementations.local import LocalFileSystem

from airflow.providers.common.ai.durable.core.segments import (
    SEGMENT_NAME,
    KeyedSegments,
    SegmentedStorage,
    SegmentPlace,
    segment_number,
)
from airflow.providers.common.ai.durable.core.storage import JournalStorage

# Most filesystems refuse names longer than 255 bytes; a quoted id can be three times its length.
_MAX_QUOTED_LENGTH = 200


def _segment(field: str, value: str) -> str:
    """
    Return one path segment that names ``value`` and no other value of ``field``.

    Quoting keeps the id readable and maps "/" and every other special character away; the
    ``field=`` prefix keeps "." and ".." from being read as directories. An id too long to quote
    is named by its digest, under a prefix a quoted id cannot have.
    """
    quoted = quote(value, safe="")
    if len(quoted) <= _MAX_QUOTED_LENGTH:
        return f"{field}={quoted}"
    return f"{field}#sha256={hashlib.sha256(value.encode()).hexdigest()}"


def _entry_or_error(found: bytes | Exception | None) -> str | Exception | None:
    if isinstance(found, bytes):
        return found.decode()
    if found is None or isinstance(found, FileNotFoundError):
        return None
    return found


# Local files through os, not open() or fsspec: a buffered file object costs three more system
# calls (fstat, ioctl, lseek) and fsspec more still, on every step of a run.
def _read_local(path: str, *, binary: bool = False) -> Any:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(descriptor, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(descriptor)
    return b"".join(chunks) if binary else b"".join(chunks).decode()


def _write_local(path: str, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    finally:
        os.close(descriptor)


def _replace_local(path: str, temporary: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: to ``temporary`` first, renamed over ``path``."""
    try:
        _write_local(temporary, data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def task_instance_folder(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The folder, relative to the cache path, that holds one task instance's journal."""
    return "/".join(
        (
            _segment("dag_id", dag_id),
            _segment("run_id", run_id),
            _segment("task_id", task_id),
            f"map_index={int(map_index)}",
        )
    )


def cache_path_journal(base: Any, *, dag_id: str, run_id: str, task_id: str, map_index: int) -> SegmentedStorage:
    """The journal of one task instance under the cache path ``base``, in segments."""
    objects = ObjectStorageStorage(base, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)
    return SegmentedStorage(LocalSegments(objects) if objects.is_local else KeyedSegments(objects))


class LocalSegments(SegmentPlace):
    """
    Segments as ``segment-<n>.log`` in a task instance's folder on local disk, each record one
    append; a storage appends to a segment of its own, created when it writes its first record.
    """

    appends = True

    def __init__(self, objects: ObjectStorageStorage) -> None:
        self.legacy = objects
        self.identity = objects.identity
        self.folder = objects.folder
        self._descriptor: int | None = None

    def _path(self, number: int) -> str:
        return f"{self.folder}/{SEGMENT_NAME}{number}.log"

    def segments(self) -> dict[int, bytes]:
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return {}
        numbers = [segment_number(name.removesuffix(".log")) for name in names if name.endswith(".log")]
        found = {}
        for number in filter(None, numbers):
            with contextlib.suppress(FileNotFoundError):
                found[number] = _read_local(self._path(number), binary=True)
        return found

    def store(self, number: int, segment: bytes, record: bytes) -> None:
        if self._descriptor is None:
            os.makedirs(self.folder, exist_ok=True)
            # Created here, never opened twice: a try that died left its segment, torn or not, as it was.
            self._descriptor = os.open(self._path(number), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o666)
        view = memoryview(record)
        while view:
            view = view[os.write(self._descriptor, view) :]

    def seal(self) -> None:
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            with contextlib.suppress(OSError):
                os.close(descriptor)

    def store_whole(self, number: int, segment: bytes) -> None:
        _replace_local(self._path(number), f"{self._path(number)}.tmp", segment)

    def delete_all(self, numbers: list[int], legacy_keys: list[str]) -> None:
        self.seal()
        self.legacy.delete_all(legacy_keys)


class ObjectStorageStorage(JournalStorage):
    """
    Journal entries as ``<cache path>/dag_id=.../run_id=.../task_id=.../map_index=N/<key>.json``:
    the entries of older releases, one object each, and this release's segments where they are
    stored whole (:func:`cache_path_journal`).

    Each completed step writes its own small object, so a write costs what the step costs. On
    local disk a write goes to a temporary file that is renamed into place, so a try killed
    mid-write leaves the previous entry whole; object stores write an object atomically. After
    success the task instance's folder is removed in one call.

    ``base`` is an ``ObjectStoragePath`` (or any universal-pathlib path).
    """

    def __init__(self, base: Any, *, dag_id: str, run_id: str, task_id: str, map_index: int) -> None:
        self._fs = base.fs
        self.folder = f"{str(base.path).rstrip('/')}/{task_instance_folder(dag_id, run_id, task_id, map_index)}"
        self.is_local = isinstance(self._fs, LocalFileSystem)
        # A remote filesystem's call is a round trip, worth making behind the agent (fsspec takes
        # calls from any thread); a local one costs less than handing it to another thread.
        self.calls_in_background = not self.is_local
        self.reads_at_once = 1 if self.is_local else 8
        self._folder_exists = False
        self.identity = f"{dag_id}/{run_id}/{task_id}/{map_index}"

    def _path(self, key: str) -> str:
        return f"{self.folder}/{key}.json"

    def read(self, key: str) -> str | None:
        try:
            if self.is_local:
                return _read_local(self._path(key))
            return self._fs.cat_file(self._path(key)).decode()
        except FileNotFoundError:
            return None

    def read_many(self, keys: list[str]) -> list[str | Exception | None]:
        if self.is_local:
            return super().read_many(keys)
        # One call: an async filesystem (s3fs, gcsfs, adlfs) fetches the objects concurrently.
        paths = [self._path(key) for key in keys]
        found = self._fs.cat(paths, on_error="return")
        return [_entry_or_error(found.get(self._fs._strip_protocol(path))) for path in paths]

    def write(self, key: str, text: str) -> None:
        data = text.encode()
        if not self.is_local:
            self._fs.pipe_file(self._path(key), data)
            return
        if not self._folder_exists:
            os.makedirs(self.folder, exist_ok=True)
            self._folder_exists = True
        # A fixed name, not mkstemp: only one try writes a key at a time, and mkstemp costs
        # three times the whole write.
        _replace_local(self._path(key), f"{self.folder}/.{key}.json.tmp", data)

    def stored_texts(self) -> dict[str, str]:
        # Bytes that are not UTF-8 make an entry that cannot be read, not a reader that fails.
        try:
            paths = self._fs.ls(self.folder, detail=False)
        except FileNotFoundError:
            return {}
        texts = {}
        for path in paths:
            name = str(path).rsplit("/", 1)[-1]
            if name.endswith(".json") and not name.startswith("."):
                texts[name.removesuffix(".json")] = self._fs.cat_file(path).decode(errors="replace")
        return texts

    def delete_all(self, keys: Iterable[str]) -> None:
        if self._fs.exists(self.folder):
            self._fs.rm(self.folder, recursive=True)
        self._folder_exists = False
        if self.is_local:
            # The task_id=, run_id= and dag_id= folders above it, while no other journal uses them.
            parent = os.path.dirname(self.folder)
            for _ in range(3):
                try:
                    os.rmdir(parent)
                except OSError:
                    break
                parent = os.path.dirname(parent)
