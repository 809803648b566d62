"""``[core] hostname_callable`` of the test's Celery workers: each names itself, though all run on one machine."""

from __future__ import annotations

import os


def hostname() -> str:
    return os.environ["DURABLE_WORKER_NAME"]
