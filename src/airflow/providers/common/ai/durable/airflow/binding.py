"""
Installs into the journal core what it asks of Airflow: the ``[core] fernet_key`` setting, the
secrets masker, the journal of the running task instance, the exception that fails a task for
good, and whether this Airflow can ask a person (human-in-the-loop). The provider's ``durable`` package
installs it on import, so the core behaves the same whichever module is imported first.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.core import encryption, in_flight, masking, scope
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow.providers.common.ai.durable.core.journal import DurableJournal


def _fernet_key_setting() -> str:
    from airflow.configuration import conf

    return conf.get("core", "fernet_key", fallback="") or ""


def _secrets_redactor() -> Callable[[Any], Any]:
    from airflow.providers.common.compat.sdk import redact

    return redact if AIRFLOW_V_3_0_PLUS else _redacting_around_lone_surrogates(redact)


_LONE_SURROGATE = re.compile("([\ud800-\udfff])")


def _redacting_around_lone_surrogates(redact: Callable[[Any], Any]) -> Callable[[str], Any]:
    # Airflow 2.11's masker matches with re2, which takes UTF-8 only: it gives up on a text with a
    # lone surrogate (a WARNING, the text unmasked), so the parts between them are masked one by one.
    def redacted(text: str) -> Any:
        if not _LONE_SURROGATE.search(text):
            return redact(text)
        return "".join(
            part if _LONE_SURROGATE.fullmatch(part) else redact(part) for part in _LONE_SURROGATE.split(text)
        )

    return redacted


def _journal_of_running_task() -> DurableJournal | None:
    # Imported when first asked: the task instance's module needs Airflow's task machinery.
    from airflow.providers.common.ai.durable.airflow.task_instance import journal_of_running_task

    return journal_of_running_task()


def _bound_journal_of_running_task() -> DurableJournal | None:
    from airflow.providers.common.ai.durable.airflow.task_instance import bound_journal_of_running_task

    return bound_journal_of_running_task()


def _asking_unsupported() -> str | None:
    from airflow import __version__
    from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_2_PLUS

    if AIRFLOW_V_3_2_PLUS:
        return None
    return (
        "needs Airflow's human-in-the-loop support, which Airflow 3.2 and later have, not Airflow "
        f"{__version__}: upgrade Airflow, or choose 'verify' or 'fail'"
    )


def install() -> None:
    """Make the journal core use Airflow's Fernet key, secrets masker, running task instance and failures."""
    from airflow.exceptions import AirflowConfigException
    from airflow.providers.common.compat.sdk import AirflowFailException

    encryption.fernet_key_setting = _fernet_key_setting
    encryption.invalid_key_error = AirflowConfigException
    masking.secrets_redactor = _secrets_redactor
    scope.journal_provider = _journal_of_running_task
    scope.bound_journal_provider = _bound_journal_of_running_task
    in_flight.failing_error = AirflowFailException
    in_flight.asking_unsupported = _asking_unsupported
