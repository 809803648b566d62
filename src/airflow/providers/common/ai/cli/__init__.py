"""The provider's commands of the ``airflow`` CLI (``airflow common-ai ...``)."""
