"""The production-shaped tests reuse tests/system's helpers (airflow_services, dag_runs)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
