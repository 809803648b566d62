"""
The journal core bound to Airflow: the storages a task keeps its journal in, the binding to the
running task instance, the summaries of tries, and approvals' wait and resume (the deferral).

Importing it makes the Airflow host (``binding.py``) the default host of the process, for what
runs outside any journal: the journal page masking an error, an export decrypting a journal, an
``in_flight`` policy checked as a DAG is parsed. The journal core alone registers nothing.
"""

from __future__ import annotations

from airflow.providers.common.ai.durable.airflow.binding import use_airflow_host as _use_airflow_host

_use_airflow_host()
