"""Binds a journal to the running task instance, in the storage its Airflow version offers."""

from __future__ import annotations

import functools
import logging
from typing import Any
from urllib.parse import urlsplit

from airflow.exceptions import AirflowConfigException
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow.providers.common.ai.durable.airflow.summaries import FAILED, UNFINISHED, write_summary
from airflow.providers.common.ai.durable.airflow.summary_stores import (
    ObjectStorageSummaries,
    SummaryStore,
    TaskStateStoreSummaries,
)
from airflow.providers.common.ai.durable.core.encryption import EncryptedStorage
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.segments import KeyedSegments, SegmentedStorage
from airflow.providers.common.ai.durable.core.storage import JournalStorage

log = logging.getLogger(__name__)

CACHE_PATH_EXAMPLE = "file:///tmp/airflow_durable_cache"


class DurableConfigError(AirflowFailException, AirflowConfigException):
    """
    An option a durable task cannot run with. It fails the task without retry, as a budget
    refusal does: every retry would meet the same option, and would only spend a try.
    """


# The Airflow providers that register the filesystems of the usual object stores.
_FILESYSTEM_PROVIDERS = {
    "s3": "apache-airflow-providers-amazon[s3fs] (it brings s3fs)",
    "s3a": "apache-airflow-providers-amazon[s3fs] (it brings s3fs)",
    "gs": "apache-airflow-providers-google (it brings gcsfs)",
    "gcs": "apache-airflow-providers-google (it brings gcsfs)",
    "abfs": "apache-airflow-providers-microsoft-azure (it brings adlfs)",
    "abfss": "apache-airflow-providers-microsoft-azure (it brings adlfs)",
    "adl": "apache-airflow-providers-microsoft-azure (it brings adlfs)",
    "az": "apache-airflow-providers-microsoft-azure (it brings adlfs)",
}

# The journals this process opened, by task instance try, and where each try's summary goes; the
# listener takes them back when the try ends.
_journals: dict[tuple[str, str, str, int, int], DurableJournal] = {}
_summaries: dict[tuple[str, str, str, int, int], SummaryStore] = {}


def _try_key(ti: Any) -> tuple[str, str, str, int, int]:
    return (ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.try_number)


def _running_task_context() -> Any | None:
    from airflow.providers.common.compat.sdk import AirflowException, get_current_context

    try:
        return get_current_context()
    except (RuntimeError, AirflowException):  # Airflow 2.11 raises the latter outside a task
        return None


def configured_cache_path() -> str:
    """``[common.ai] durable_cache_path``, or ``""`` when it is not set."""
    from airflow.configuration import conf

    return (conf.get("common.ai", "durable_cache_path", fallback="") or "").strip()


def storage_for_task(context: Any) -> JournalStorage:
    """
    The storage of the journal of the task instance ``context`` belongs to.

    The task state store when Airflow offers it (3.3+), else ``[common.ai] durable_cache_path``;
    refuses, naming the option, when neither is there.
    """

    ti = context["ti"]
    identity = f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.map_index}"
    cache_path = configured_cache_path()
    accessor = context.get("task_state_store")
    if accessor is not None:
        from airflow.providers.common.ai.durable.airflow.task_state_store import TaskStateStoreStorage

        if cache_path:
            log.info(
                "Durable: the journal is kept in the task state store; "
                "[common.ai] durable_cache_path is only used on Airflow before 3.3"
            )
        return SegmentedStorage(KeyedSegments(TaskStateStoreStorage(accessor, identity)))
    if not cache_path:
        raise DurableConfigError(
            "Durable execution needs [common.ai] durable_cache_path on Airflow before 3.3: set it to an "
            f"ObjectStorage URI, for example AIRFLOW__COMMON_AI__DURABLE_CACHE_PATH={CACHE_PATH_EXAMPLE}"
        )
    from airflow.providers.common.ai.durable.airflow.object_storage import cache_path_journal

    base = cache_path_base(cache_path)
    try:
        # Loads the filesystem now, so that a missing library fails the try before any call.
        return cache_path_journal(base, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, map_index=ti.map_index)
    except ImportError as error:
        raise DurableConfigError(
            f"[common.ai] durable_cache_path uses {base.protocol}://, whose filesystem could not load on this "
            f"worker: {error}"
        ) from error


def cache_path_base(cache_path: str) -> Any:
    """
    The ``ObjectStoragePath`` of ``durable_cache_path``; refuses, naming the option and the fix, a
    scheme whose filesystem is not installed and a local path that is not absolute.
    """
    from airflow.providers.common.compat.sdk import ObjectStoragePath, io

    scheme, host, path = urlsplit(cache_path)[:3]
    if scheme == "local" and not io.has_fs("local"):
        # Airflow 2.11 knows the local filesystem as file:// only.
        scheme, cache_path = "file", "file" + cache_path[len("local") :]
    if scheme in ("", "file", "local"):
        # ObjectStoragePath reads "file://dir" and "dir" relative to the working directory, which
        # differs between workers and between tries, and "file:dir" as "/dir".
        if host or not path.startswith("/"):
            raise DurableConfigError(
                f"[common.ai] durable_cache_path {cache_path!r} is not an absolute local path, which each worker "
                "would resolve on its own: write file:/// and the absolute path, "
                f"for example {CACHE_PATH_EXAMPLE}"
            )
    elif not io.has_fs(scheme):
        raise DurableConfigError(
            f"[common.ai] durable_cache_path uses {scheme}://, for which no filesystem is installed on this worker: "
            f"{_what_to_install(scheme)} on every worker"
        )
    return ObjectStoragePath(cache_path)


def _what_to_install(scheme: str) -> str:
    if scheme in _FILESYSTEM_PROVIDERS:
        return f"install {_FILESYSTEM_PROVIDERS[scheme]}"
    return (
        f"install the Airflow provider that registers a filesystem for {scheme}://, "
        "or use file:///..., s3://CONN_ID@bucket/path or gs://CONN_ID@bucket/path"
    )


def journal_of_running_task() -> DurableJournal | None:
    """The journal of the running task instance's try, the same for every call in it; ``None`` outside a task."""
    context = _running_task_context()
    if context is None:
        return None
    key = _try_key(context["ti"])
    journal = _journals.get(key)
    if journal is None:
        # The Airflow host: the durable.airflow package made it the default of the process.
        host = current_host()
        storage = EncryptedStorage(storage_for_task(context), host)
        try_number = context["ti"].try_number
        summaries = summary_store_for_task(context)
        host = host.for_try(
            try_number,
            budget_first_try=_first_try_of_budget(context),
            after_each_run=functools.partial(_keep_summary, summaries, try_number=try_number),
        )
        journal = _journals[key] = DurableJournal(storage, host=host)
        _summaries[key] = summaries
    return journal


def _first_try_of_budget(context: Any) -> int:
    """
    The first try the task instance's budget counts: a clear of a finished task instance starts a
    new budget. Airflow's clear sets ``max_tries`` to the last try's number plus the task's
    retries; a retry leaves it as it was.
    """
    ti, task = context["ti"], context.get("task")
    retries = getattr(task, "retries", None)
    max_tries = getattr(ti, "max_tries", None)
    if not isinstance(retries, int) or not isinstance(max_tries, int):
        return 1
    return min(max(max_tries - retries + 1, 1), ti.try_number)


def _keep_summary(summaries: SummaryStore, journal: DurableJournal, try_number: int) -> None:
    # While the try runs: a try that fails with retries left can no longer write once it ended.
    write_summary(summaries, journal, try_number=try_number, outcome=UNFINISHED)


def bound_journal_of_running_task() -> DurableJournal | None:
    """The journal this try of the running task instance opened, if it opened one."""
    context = _running_task_context()
    return _journals.get(_try_key(context["ti"])) if context is not None else None


def keep_summary_of_failed_try(ti: Any) -> None:
    """
    As ``ti``'s try fails, inside the try: keep its summary as failed, once, if it opened a journal.

    Before the task runner reports the failure: after it, Airflow 3.3 refuses the write of a try
    that has retries left (the next try owns the task instance's rows).
    """
    key = _try_key(ti)
    journal, summaries = _journals.get(key), _summaries.pop(key, None)
    if journal is None or summaries is None:
        return
    journal.settle()
    write_summary(summaries, journal, try_number=ti.try_number, outcome=FAILED)


def journal_left_by_earlier_tries(ti: Any) -> DurableJournal | None:
    """
    The journal of ``ti``'s task instance, for a try that ended without opening it; ``None`` where
    none can be kept: outside a worker (the api-server marks a task instance), or where neither the
    task state store nor ``[common.ai] durable_cache_path`` is there.
    """
    get_template_context = getattr(ti, "get_template_context", None)
    if get_template_context is None:
        return None
    context = get_template_context()
    if context.get("task_state_store") is None and not configured_cache_path():
        return None
    host = current_host()
    return DurableJournal(EncryptedStorage(storage_for_task(context), host), host=host)


def take_journal(ti: Any) -> DurableJournal | None:
    """Hand over, once, the journal this process opened for ``ti``'s try, if it opened one."""
    return _journals.pop(_try_key(ti), None)


def summary_store_for_task(context: Any) -> SummaryStore:
    """Where the try summaries of the task instance ``context`` belongs to are kept: beside its journal."""
    accessor = context.get("task_state_store")
    if accessor is not None:
        return TaskStateStoreSummaries(accessor)
    ti = context["ti"]
    base = cache_path_base(configured_cache_path())
    return ObjectStorageSummaries(base, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, map_index=ti.map_index)


def take_summary_store(ti: Any) -> SummaryStore | None:
    """Hand over, once, the summary store of the journal :func:`take_journal` hands over for ``ti``."""
    return _summaries.pop(_try_key(ti), None)
