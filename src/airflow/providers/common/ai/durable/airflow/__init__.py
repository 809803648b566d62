"""
The journal core bound to Airflow: the storages a task keeps its journal in, the binding to the
running task instance, the summaries of tries, and approvals' wait and resume (the deferral).
"""
