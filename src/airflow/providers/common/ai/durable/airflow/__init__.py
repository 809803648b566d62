"""
The journal core bound to Airflow: the storages a task keeps its journal in, the binding to the
running task instance, the summaries of tries, and approvals' wait and resume (the deferral).

``binding.py`` defines the Airflow host; the ``durable`` package registers it as the default host
of the process, built on first use. Importing this package runs nothing.
"""
