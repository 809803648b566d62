"""Airflow plugins of the provider: the durable listener and the journal page."""
