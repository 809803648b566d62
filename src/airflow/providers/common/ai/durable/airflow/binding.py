"""
The Airflow host of the journal core (``core/host.py``): what the core asks of Airflow, answered
by Airflow. The ``[core] fernet_key`` setting, the secrets masker, the exception that fails a
task for good, whether this Airflow can ask a person (human-in-the-loop), the model prices a
deployment sets (``[common.ai] model_prices``), the traces and metrics of each step, the journal
of the running task instance, and the wording of the core's messages that names Airflow's
settings and the provider's entry points.

:data:`AIRFLOW_HOST` is that host (``Host.for_try`` makes it one journal's). Importing this
module changes nothing in the core: the ``durable`` package registers it as the default host of the
process, which the framework adapters look up the running task's journal with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow.providers.common.ai.durable.airflow import telemetry
from airflow.providers.common.ai.durable.core import prices
from airflow.providers.common.ai.durable.core.host import Host, HostWording
from airflow.providers.common.ai.version_compat import AIRFLOW_V_3_0_PLUS

if TYPE_CHECKING:
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


# The model prices read last, and the environment variable's value they were read under: reading
# Airflow's configuration costs more than a model call's price, and every live call is priced.
_read_prices: tuple[str | None, dict[str, prices.ModelPrice]] | None = None


def _price_overrides() -> dict[str, prices.ModelPrice]:
    """``[common.ai] model_prices``, read again when its environment variable changes."""
    global _read_prices
    variable = os.environ.get("AIRFLOW__COMMON_AI__MODEL_PRICES")
    if _read_prices is None or _read_prices[0] != variable:
        _read_prices = (variable, _configured_prices())
    return _read_prices[1]


def _configured_prices() -> dict[str, prices.ModelPrice]:
    """``[common.ai] model_prices``: US dollars per million tokens by model name; refused unless in that shape."""
    import json

    from airflow.configuration import conf
    from airflow.exceptions import AirflowConfigException

    text = conf.get("common.ai", "model_prices", fallback="") or ""
    if not text.strip():
        return {}
    example = '{"my-llama": {"input": 0.2, "output": 0.6, "cached_input": 0.05}}'
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise TypeError("not a mapping")
        return {str(model): _model_price(price) for model, price in value.items()}
    except (ValueError, TypeError) as error:
        raise AirflowConfigException(
            f"[common.ai] model_prices must map model names to US dollars per million tokens, for example "
            f"{example}: {error}"
        ) from None


def _model_price(price: object) -> prices.ModelPrice:
    if (
        not isinstance(price, dict)
        or not {"input", "output"} <= set(price)
        or set(price) - {"input", "output", "cached_input"}
    ):
        raise TypeError(f"{price!r} does not name input and output (and optionally cached_input) and nothing else")
    amounts = {name: price[name] for name in price}
    for name, amount in amounts.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 <= amount < float("inf"):
            raise ValueError(f"{name} of {amount!r} is not a price of 0 or more")
    return prices.ModelPrice(**{name: float(amount) for name, amount in amounts.items()})


def _failing_error() -> type[Exception]:
    from airflow.providers.common.compat.sdk import AirflowFailException

    return AirflowFailException


def _invalid_key_error() -> type[Exception]:
    from airflow.exceptions import AirflowConfigException

    return AirflowConfigException


#: The core's messages, in the words of Airflow and of this provider's entry points.
AIRFLOW_WORDING = HostWording(
    tell_runs_apart="give each its own durable_key (run_durably(..., durable_key=...))",
    prices_setting="[common.ai] model_prices",
    durable_tool_call="a function-tool or MCP tool call of a durable run (run_durably, run_durably_sync or "
    "AgentOperator(durable=True)) in an Airflow task",
    asks_a_person="AgentOperator(durable=True)",
    key_setting="[core] fernet_key",
    where_keys_are_set="on every Airflow component",
    export_again="export it again with: airflow common-ai journal export DAG_ID TASK_ID RUN_ID -o FILE",
)

#: What the journal core asks of Airflow.
AIRFLOW_HOST = Host(
    fernet_key_setting=_fernet_key_setting,
    invalid_key_error=_invalid_key_error(),
    secrets_redactor=_secrets_redactor,
    failing_error=_failing_error(),
    asking_unsupported=_asking_unsupported,
    price_overrides=_price_overrides,
    listeners=(telemetry.listen,),
    journal_of_running_task=_journal_of_running_task,
    bound_journal_of_running_task=_bound_journal_of_running_task,
    wording=AIRFLOW_WORDING,
)
