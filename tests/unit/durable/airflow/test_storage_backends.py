"""One behaviour suite that every journal storage backend passes."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from durable_backends import FakeTaskStateStore, make_storage
from upath import UPath

from airflow.providers.common.ai.durable.airflow.object_storage import ObjectStorageStorage, task_instance_folder
from airflow.providers.common.ai.durable.airflow.task_state_store import KEY_PREFIX
from airflow.providers.common.ai.durable.core.fingerprint import fingerprint
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.segments import SEGMENT_BYTES, records_of


def record_steps(journal: DurableJournal, n: int, *, live: list[int]) -> list[str]:
    results = []
    with journal.run() as run:
        for i in range(n):
            step = run.claim("tool", "echo", fingerprint({"i": i}))
            if step.replayed:
                results.append(step.result)
                continue
            with step.running(mark_in_flight=True):
                live.append(i)
                result = f"result {i}"
            step.record(result)
            results.append(result)
    return results


def test_a_missing_key_reads_as_none(new_storage):
    assert new_storage().read("1.1") is None


def test_a_written_entry_reads_back_and_a_second_write_replaces_it(new_storage):
    storage = new_storage()
    storage.write("1.1", '{"a": 1}')
    storage.write("1.1", '{"a": 2}')
    assert new_storage().read("1.1") == '{"a": 2}'


def test_a_second_try_replays_what_the_first_recorded(new_storage):
    live: list[int] = []
    first = record_steps(DurableJournal(new_storage()), 5, live=live)
    second = record_steps(DurableJournal(new_storage()), 5, live=live)
    assert second == first
    assert live == [0, 1, 2, 3, 4]


def test_after_delete_nothing_is_left_and_the_next_run_starts_over(new_storage):
    live: list[int] = []
    record_steps(DurableJournal(new_storage()), 3, live=live)
    DurableJournal(new_storage()).delete()
    assert [new_storage().read(f"1.{i}") for i in (1, 2, 3)] == [None, None, None]
    record_steps(DurableJournal(new_storage()), 3, live=live)
    assert live == [0, 1, 2, 0, 1, 2]


def test_a_reader_outside_the_try_lists_every_entry_by_key(new_storage, backend):
    if backend == "task-state-store":
        pytest.skip("a task's own view of its store cannot list: see test_a_task_cannot_list_its_task_state_store")
    assert new_storage().stored_texts() == {}
    storage = new_storage()
    storage.write("1.1", '{"a": 1}')
    storage.write("1.2.1.1", '{"b": 2}')
    storage.write("1.1", '{"a": 3}')
    assert new_storage().stored_texts() == {"1.1": '{"a": 3}', "1.2.1.1": '{"b": 2}'}
    new_storage().delete_all([])
    assert new_storage().stored_texts() == {}


def test_a_task_cannot_list_its_task_state_store():
    # The journal page lists the rows from outside the task: test_task_state_store_rows.py.
    with pytest.raises(NotImplementedError, match="TaskStateStoreStorage cannot list its entries"):
        make_storage("task-state-store", None).stored_texts()


def test_the_cache_path_lists_neither_a_temporary_file_nor_another_task_instances_entries(tmp_path):
    ids = {"dag_id": "dag", "run_id": "r", "task_id": "agent"}
    storage = ObjectStorageStorage(UPath(f"file://{tmp_path}"), **ids, map_index=-1)
    ObjectStorageStorage(UPath(f"file://{tmp_path}"), **ids, map_index=0).write("1.1", "another's")
    storage.write("1.1", "mine")
    folder = tmp_path / task_instance_folder(**ids, map_index=-1)
    (folder / ".1.2.json.tmp").write_text("cut off")
    (folder / "1.3.json").write_bytes(b"\xff not UTF-8")
    assert storage.stored_texts() == {"1.1": "mine", "1.3": "\ufffd not UTF-8"}


def records_in_row(accessor: FakeTaskStateStore, name: str) -> list[tuple[str, str]]:
    return records_of(json.loads(accessor.rows[f"{KEY_PREFIX}{name}"]).encode("utf-8", "surrogatepass"))[0]


def test_the_task_state_store_keeps_segments_under_a_reserved_prefix_that_never_expires():
    accessor = FakeTaskStateStore()
    accessor.set("job_id", "users-own-key")
    storage = make_storage("task-state-store", None, accessor)
    record_steps(DurableJournal(storage), 2, live=[])

    # Both entries in one segment; no snapshot of the run: a retry reads the segment in one call.
    assert sorted(accessor.rows) == sorted(["job_id", f"{KEY_PREFIX}segment-1"])
    assert [key for key, _ in records_in_row(accessor, "segment-1")][-2:] == ["1.1", "1.2"]
    assert accessor.retention[f"{KEY_PREFIX}segment-1"] == timedelta.max

    DurableJournal(storage).delete()
    assert list(accessor.rows) == ["job_id"]
    assert "clear" not in accessor.calls


def test_the_task_state_store_is_written_once_per_step_plus_the_in_flight_mark_of_a_tool_and_a_new_runs_start():
    accessor = FakeTaskStateStore()
    storage = make_storage("task-state-store", None, accessor)
    with DurableJournal(storage).run() as run:
        run.claim("model", "gpt", "f1").record("answer")
        step = run.claim("tool", "echo", "f2")
        with step.running(mark_in_flight=True):
            pass
        step.record("done")
    # 1.1 start mark (holds the run's number) and result, 1.2 in-flight mark and result; a write
    # still queued when a newer one of its key comes is replaced by it, so at most that many.
    assert 2 <= accessor.calls.count("set") <= 4
    records = records_in_row(accessor, "segment-1")
    assert [json.loads(text)["state"] for key, text in records if key in ("1.1", "1.2")][-2:] == ["done"] * 2


def test_the_cache_path_appends_each_step_to_the_segment_of_its_try_and_never_rewrites_earlier_ones(tmp_path):
    storage = make_storage("file", tmp_path)
    record_steps(DurableJournal(storage), 3, live=[])
    storage.seal()  # the try ends
    folder = tmp_path / "cache" / task_instance_folder("dag", "manual__2026-11-29", "agent", -1)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert sorted(before) == ["segment-1.log"]
    assert list(dict(records_of(before["segment-1.log"])[0])) == ["1.1", "1.2", "1.3"]

    journal = DurableJournal(make_storage("file", tmp_path))
    with journal.run() as run:
        for i in range(4):
            step = run.claim("tool", "echo", fingerprint({"i": i}))
            if not step.replayed:
                step.record(f"result {i}")
    after = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert after["segment-1.log"] == before["segment-1.log"]
    assert [key for key, _ in records_of(after["segment-2.log"])[0]] == ["1.4"]


def test_a_cache_path_write_killed_before_its_rename_leaves_the_previous_entry_readable(tmp_path, monkeypatch):
    storage = make_storage("file-entries", tmp_path)
    storage.write("1.1", '{"complete": true}')

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        storage.write("1.1", '{"half": ')
    monkeypatch.undo()
    assert storage.read("1.1") == '{"complete": true}'
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["1.1.json"]


@pytest.mark.parametrize("kind", ["file", "file-entries"])
def test_a_cache_path_write_cut_off_mid_write_leaves_the_previous_entry_readable(tmp_path, monkeypatch, kind):
    storage = make_storage(kind, tmp_path)
    storage.write("1.1", '{"complete": true}')
    write = os.write

    def cut_off(descriptor, data):
        write(descriptor, bytes(data[:3]))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", cut_off)
    with pytest.raises(KeyboardInterrupt):
        storage.write("1.1", '{"replaced": true}')
    monkeypatch.undo()
    assert storage.read("1.1") == '{"complete": true}'
    assert make_storage(kind, tmp_path).read("1.1") == '{"complete": true}'
    if kind == "file-entries":
        assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["1.1.json"]
    else:  # the torn record ends its segment: the next write starts another
        storage.write("1.2", "next")
        assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["segment-1.log", "segment-2.log"]
        assert make_storage(kind, tmp_path).read_many(["1.1", "1.2"]) == ['{"complete": true}', "next"]


def test_a_cache_path_entry_larger_than_one_read_of_the_disk_reads_back_whole(tmp_path):
    storage = make_storage("file", tmp_path)
    # Multi-byte characters across every 64 KiB boundary: the entry is decoded once, whole.
    text = json.dumps({"result": "ü€" * 100_000}, ensure_ascii=False)
    storage.write("1.1", text)
    assert storage.read("1.1") == text
    assert storage.read_many(["1.1", "1.2"]) == [text, None]


def test_after_success_no_empty_folder_is_left_under_the_cache_path_but_other_journals_stay(tmp_path):
    other = ObjectStorageStorage(
        UPath(f"file://{tmp_path}/cache"), dag_id="dag", run_id="manual__2026-11-29", task_id="other", map_index=-1
    )
    record_steps(DurableJournal(other), 1, live=[])
    mine = make_storage("file", tmp_path)
    record_steps(DurableJournal(mine), 1, live=[])

    DurableJournal(mine).delete()
    assert other.read("1.1") is not None
    DurableJournal(other).delete()
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize(
    "a, b",
    [
        (("dag", "run/1", "task", -1), ("dag", "run", "1/task", -1)),
        (("dag", "a=b", "t", -1), ("dag", "a%3Db", "t", -1)),
        (("dag", "run", "task", 1), ("dag", "run", "task", 2)),
        (("dag", "x" * 300, "t", -1), ("dag", "x" * 299, "t", -1)),
    ],
)
def test_cache_path_folders_of_different_task_instances_never_collide(a, b):
    assert task_instance_folder(*a) != task_instance_folder(*b)


@pytest.mark.parametrize("run_id", ["..", ".", "../../etc", "a" * 400, "scheduled__2026-11-29T00:00:00+00:00"])
def test_cache_path_folders_stay_under_the_cache_path_whatever_the_ids_hold(run_id):
    segments = task_instance_folder("dag", run_id, "task", -1).split("/")
    assert len(segments) == 4
    assert all(segment not in (".", "..") and len(segment) < 255 for segment in segments)


def test_the_cache_path_works_on_any_fsspec_filesystem(tmp_path):
    base = UPath("memory:///durable-cache")
    ids = {"dag_id": "dag", "run_id": "r", "task_id": "t", "map_index": 3}
    live: list[int] = []
    record_steps(DurableJournal(ObjectStorageStorage(base, **ids)), 2, live=live)
    # Two entries and, as each read of a remote filesystem is a round trip, the run's snapshot.
    assert sorted(p.name for p in (base / task_instance_folder("dag", "r", "t", 3)).iterdir()) == [
        "0.1.json",
        "1.1.json",
        "1.2.json",
    ]
    record_steps(DurableJournal(ObjectStorageStorage(base, **ids)), 2, live=live)
    assert live == [0, 1]
    DurableJournal(ObjectStorageStorage(base, **ids)).delete()
    assert not (base / task_instance_folder("dag", "r", "t", 3)).exists()


def test_clean_up_on_segments_is_one_delete_a_segment_and_reads_nothing_again():
    accessor = FakeTaskStateStore()
    record_steps(DurableJournal(make_storage("task-state-store", None, accessor)), 400, live=[])
    journal = DurableJournal(make_storage("task-state-store", None, accessor))
    record_steps(journal, 400, live=[])  # try 2 replays them and succeeds
    segments = len(accessor.rows)
    stored = sum(len(json.loads(row)) for row in accessor.rows.values())
    assert segments == -(-stored // SEGMENT_BYTES) and segments >= 2  # every segment but the last one full
    accessor.calls.clear()

    journal.finish(succeeded=True)
    assert accessor.rows == {}
    assert accessor.calls == ["delete"] * segments


def test_an_older_releases_journal_of_one_entry_a_key_is_deleted_entry_by_entry():
    accessor = FakeTaskStateStore()
    storage = make_storage("task-state-store-entries", None, accessor)
    record_steps(DurableJournal(storage), 10, live=[])  # try 1 records ten steps
    journal = DurableJournal(storage)
    record_steps(journal, 10, live=[])  # try 2 replays them and succeeds
    accessor.calls.clear()

    journal.finish(succeeded=True)
    assert accessor.rows == {}
    # ten deletes and one of the run's snapshot, a read of the index and one past the run's last
    # step; not one past the last run: the replay read until the first that was not
    assert accessor.calls.count("delete") == 11
    assert 1 <= accessor.calls.count("get") <= 2
    assert len(accessor.calls) <= 13


def test_clean_up_after_airflow_cleared_the_task_state_on_success_is_one_read(monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS", "True")
    accessor = FakeTaskStateStore()
    storage = make_storage("task-state-store", None, accessor)
    journal = DurableJournal(storage)
    record_steps(journal, 10, live=[])
    journal.settle()
    accessor.rows.clear()  # what the api-server does as the task instance succeeds
    accessor.calls.clear()

    journal.finish(succeeded=True)
    assert accessor.calls == ["get"]  # the first segment: gone, so all are


def test_clean_up_with_clear_on_success_still_deletes_a_journal_airflow_did_not_clear(monkeypatch):
    # A task that skipped itself is done, but Airflow clears the keys only of one that succeeded.
    monkeypatch.setenv("AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS", "True")
    accessor = FakeTaskStateStore()
    accessor.set("job_id", "users-own-key")
    journal = DurableJournal(make_storage("task-state-store", None, accessor))
    record_steps(journal, 10, live=[])
    accessor.calls.clear()

    journal.finish(succeeded=True)
    assert list(accessor.rows) == ["job_id"]
    assert accessor.calls.count("delete") == 1  # the one segment


@pytest.mark.parametrize("kind", ["memory", "file", "fsspec-memory", "task-state-store"])
def test_read_many_gives_each_key_its_entry_or_none_in_order(kind, tmp_path):
    storage = make_storage(kind, tmp_path)
    storage.write("1.2", '{"b":2}')
    storage.write("1.1", '{"a":"é\\ud800"}')
    assert storage.read_many(["1.1", "1.3", "1.2"]) == ['{"a":"é\\ud800"}', None, '{"b":2}']


@pytest.mark.parametrize(
    "index",
    ['{"format":3,"kind":"index","parents":"1.2"}', '{"format":3,"kind":"index"}', "not json", '{"format":99}'],
)
def test_an_index_that_cannot_be_read_hides_no_nested_run_from_the_clean_up(index, caplog):
    # An older release's journal is deleted key by key: the clean-up finds only what the journal names.
    accessor = FakeTaskStateStore()
    storage = make_storage("task-state-store-entries", None, accessor)
    journal = DurableJournal(storage)
    with journal.run() as run:
        step = run.claim("tool", "ask_expert", fingerprint({"q": 1}))
        with step.running(mark_in_flight=True):
            record_steps(journal, 2, live=[])  # a nested run, 1.1.1.1 and 1.1.1.2
        step.record("answer")
    journal.settle()
    assert {f"{KEY_PREFIX}{key}" for key in ("0", "1.1", "1.1.1.1", "1.1.1.2")} <= set(accessor.rows)
    accessor.rows[f"{KEY_PREFIX}0"] = json.dumps(index)  # another release, or edited by hand

    DurableJournal(storage).delete()
    assert accessor.rows == {}
    assert "the journal's index cannot be read; clean-up looks for nested runs under every step" in caplog.text
