"""
The journal's entries as records in segments (R-4): a record read back as written whatever it
holds, a torn tail at every byte of a record leaving every whole record before it readable,
segments stored whole bounded in size, the entries of an older release read and deleted beside
them, and a write the store refused leaving nothing behind.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from test_journal import Agentish, three_calls
from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import cache_path_journal
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.segments import (
    KeyedSegments,
    SegmentedStorage,
    record,
    records_of,
    segment_name,
)
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage

ODD = [
    "",
    "plain",
    "line\nbreaks\r\nand\ttabs",
    "émoji 🦆 and RTL \u202e text",
    "\x00 nul and \ufeff bom",
    "a lone \udc80 surrogate",
    "1234 0.1\n" * 50,  # looks like a record header
    "x" * 300_000,
]


def test_a_record_reads_back_as_written_whatever_its_text_holds():
    segment = b"".join(record(f"1.{n}", text) for n, text in enumerate(ODD, start=1))
    found, end = records_of(segment)
    assert found == [(f"1.{n}", text) for n, text in enumerate(ODD, start=1)]
    assert end == len(segment)


def test_a_segment_torn_at_any_byte_of_its_last_record_reads_every_record_before_it():
    whole = [record("1.1", '{"a":"é"}'), record("1.2", "🦆" * 3)]
    last = record("1.3", '{"format":7,"state":"done","result":"ü"}')
    head = b"".join(whole)
    for cut in range(len(last)):
        found, end = records_of(head + last[:cut])
        assert found == [("1.1", '{"a":"é"}'), ("1.2", "🦆" * 3)], cut
        assert end == len(head)
    assert [key for key, _ in records_of(head + last)[0]] == ["1.1", "1.2", "1.3"]


def test_a_record_altered_in_the_store_ends_what_is_read():
    first, second = record("1.1", "one"), record("1.2", "two")
    for at in range(len(second)):
        altered = bytearray(first + second)
        altered[len(first) + at] ^= 0x01
        assert records_of(bytes(altered)) == ([("1.1", "one")], len(first)), at


class Blobs(InMemoryStorage):
    """Entries in memory, counting the store's calls, refusing the writes it is told to."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.refuse = 0
        self.written: list[tuple[str, int]] = []

    def read(self, key):
        self.calls["read"] += 1
        return super().read(key)

    def write(self, key, text):
        if self.refuse:
            self.refuse -= 1
            raise OSError("the store refused the write")
        self.calls["write"] += 1
        self.written.append((key, len(text)))
        super().write(key, text)

    def delete_all(self, keys):
        keys = list(keys)
        self.calls["delete"] += len(keys)
        for key in keys:
            self.entries.pop(key, None)


def test_segments_stored_whole_are_bounded_and_a_clean_up_deletes_one_key_a_segment():
    blobs = Blobs()
    storage = SegmentedStorage(KeyedSegments(blobs), segment_bytes=4096)
    texts = {f"1.{n}": f'{{"n":{n},"pad":"{"p" * 500}"}}' for n in range(1, 101)}
    for key, text in texts.items():
        storage.write(key, text)

    assert blobs.calls["write"] == 100  # one write a step
    assert all(size < 4096 + 600 for _, size in blobs.written)  # each bounded
    segments = sorted(key for key in blobs.entries if key.startswith("segment-"))
    assert len(segments) == 15 and set(blobs.entries) == set(segments)

    again = SegmentedStorage(KeyedSegments(blobs))
    assert again.read_many(list(texts)) == list(texts.values())
    assert again.stored_texts() == texts
    blobs.calls.clear()
    again.delete_all(texts)
    assert blobs.entries == {} and blobs.calls["delete"] == 15


def test_a_later_record_of_a_key_replaces_the_earlier_one_across_segments_and_tries():
    blobs = Blobs()
    first = SegmentedStorage(KeyedSegments(blobs), segment_bytes=64)
    first.write("1.2", "in flight")
    first.write("1.1", "x" * 100)
    second = SegmentedStorage(KeyedSegments(blobs))
    assert second.read("1.2") == "in flight"
    second.write("1.2", "done")
    assert SegmentedStorage(KeyedSegments(blobs)).read_many(["1.1", "1.2", "1.3"]) == ["x" * 100, "done", None]


def test_a_write_the_store_refused_leaves_nothing_a_later_write_or_try_would_read():
    blobs = Blobs()
    storage = SegmentedStorage(KeyedSegments(blobs))
    storage.write("1.1", "one")
    blobs.refuse = 1
    with pytest.raises(OSError, match="refused"):
        storage.write("1.2", "in flight")
    assert storage.read("1.2") is None
    storage.write("1.3", "three")
    assert SegmentedStorage(KeyedSegments(blobs)).read_many(["1.1", "1.2", "1.3"]) == ["one", None, "three"]


def test_an_older_releases_entries_are_read_where_no_segment_holds_the_key_and_deleted_with_the_segments():
    blobs = Blobs()
    blobs.entries.update({"0": '{"index":1}', "1.1": "old one", "1.2": "old two", "0.1": "old snapshot"})
    storage = SegmentedStorage(KeyedSegments(blobs))
    assert storage.read_many(["1.1", "1.2", "1.3"]) == ["old one", "old two", None]
    storage.write("1.2", "new two")
    storage.write("1.3", "three")
    again = SegmentedStorage(KeyedSegments(blobs))
    assert again.read_many(["1.1", "1.2", "1.3"]) == ["old one", "new two", "three"]
    assert again.stored_texts() == {
        **{"0": '{"index":1}', "0.1": "old snapshot"},
        **{"1.1": "old one", "1.2": "new two", "1.3": "three"},
    }
    again.delete_all(["0", "1.1", "1.2", "1.3"])
    assert blobs.entries == {}


def test_without_an_older_journal_a_read_of_a_missing_key_costs_no_round_trip():
    blobs = Blobs()
    storage = SegmentedStorage(KeyedSegments(blobs))
    storage.read("1.1")
    loaded = blobs.calls["read"]
    assert storage.read_many([f"1.{n}" for n in range(2, 50)]) == [None] * 48
    assert blobs.calls["read"] == loaded


def folder_of(tmp_path):
    (folder,) = {path.parent for path in tmp_path.rglob("segment-*.log")}
    return folder


def local(tmp_path):
    ids = {"dag_id": "dag", "run_id": "r", "task_id": "t", "map_index": -1}
    return cache_path_journal(UPath(f"file://{tmp_path}/cache"), **ids)


def test_on_local_disk_a_try_appends_to_a_segment_of_its_own_and_a_clean_up_removes_the_folder(tmp_path):
    first = local(tmp_path)
    for n in range(1, 6):
        first.write(f"1.{n}", f"step {n}")
    first.seal()
    second = local(tmp_path)
    assert second.read_many(["1.1", "1.5"]) == ["step 1", "step 5"]
    second.write("1.6", "step 6")
    assert sorted(path.name for path in folder_of(tmp_path).iterdir()) == ["segment-1.log", "segment-2.log"]
    second.delete_all([])
    assert not any(tmp_path.rglob("*.log"))


def test_on_local_disk_a_try_killed_at_any_byte_of_an_append_leaves_every_completed_step_readable(tmp_path):
    storage = local(tmp_path)
    storage.write("1.1", "one")
    storage.write("1.2", "two")
    storage.seal()
    path = folder_of(tmp_path) / "segment-1.log"
    whole = path.read_bytes()
    last = record("1.3", '{"result":"three 🦆"}')
    for cut in range(len(last)):
        path.write_bytes(whole + last[:cut])
        for other in path.parent.glob("segment-*.log"):
            if other != path:
                other.unlink()
        retry = local(tmp_path)
        assert retry.read_many(["1.1", "1.2", "1.3"]) == ["one", "two", None], cut
        retry.write("1.3", "three")  # into a segment of its own, after the torn one
        retry.seal()
        assert local(tmp_path).read_many(["1.1", "1.2", "1.3"]) == ["one", "two", "three"], cut


def test_a_journal_on_segments_replays_what_the_failed_try_completed_though_it_died_mid_append(tmp_path):
    first = Agentish()
    with pytest.raises(RuntimeError):
        three_calls(first, DurableJournal(local(tmp_path)), fail_at="final")
    path = folder_of(tmp_path) / "segment-1.log"
    with open(path, "ab") as segment:  # the try died writing the final call's entry
        segment.write(record("1.3", '{"format":7,"state":"done"}')[:-7])

    second = Agentish()
    journal = DurableJournal(local(tmp_path))
    three_calls(second, journal)
    assert second.live_calls == {"gpt": 1}
    journal.finish(succeeded=True)
    assert not os.path.exists(path)


@pytest.mark.parametrize("segment_bytes", [1, 256, 1 << 20])
def test_a_journal_replays_the_same_on_segments_of_any_size(segment_bytes):
    blobs = Blobs()
    three_calls(Agentish(), DurableJournal(SegmentedStorage(KeyedSegments(blobs), segment_bytes=segment_bytes)))
    assert all(key == segment_name(int(key.rsplit("-", 1)[1])) for key in blobs.entries)
    second = Agentish()
    three_calls(second, DurableJournal(SegmentedStorage(KeyedSegments(blobs), segment_bytes=segment_bytes)))
    assert second.live_calls == {}


def test_a_key_written_again_replaces_its_record_in_a_segment_stored_whole():
    blobs = Blobs()
    storage = SegmentedStorage(KeyedSegments(blobs))
    storage.write("1.1", "in flight")
    storage.write("1.1", "done")
    storage.write("1.2", "next")
    assert records_of(blobs.entries["segment-1"].encode())[0] == [("1.1", "done"), ("1.2", "next")]


def test_on_local_disk_a_sealed_segment_keeps_each_keys_last_record_only(tmp_path):
    storage = local(tmp_path)
    for n in range(1, 4):
        storage.write(f"1.{n}", f"mark {n}")
        storage.write(f"1.{n}", f"done {n}")
    path = folder_of(tmp_path) / "segment-1.log"
    assert len(records_of(path.read_bytes())[0]) == 6
    storage.seal()
    assert records_of(path.read_bytes())[0] == [(f"1.{n}", f"done {n}") for n in range(1, 4)]
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_on_local_disk_a_segment_name_another_process_took_is_never_appended_to(tmp_path):
    first, second = local(tmp_path), local(tmp_path)
    first.read("1.1")
    second.read("1.1")  # both found no segment: both would start segment 1
    first.write("1.1", "mine")
    second.write("1.2", "theirs")
    assert sorted(p.name for p in folder_of(tmp_path).iterdir()) == ["segment-1.log", "segment-2.log"]
    assert local(tmp_path).read_many(["1.1", "1.2"]) == ["mine", "theirs"]
