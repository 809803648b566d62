"""Pydantic AI is an optional extra: without it, importing the adapter names the extra to install (R-65)."""

from __future__ import annotations

import importlib
import sys

import pytest
from airflow.exceptions import AirflowOptionalProviderFeatureException


def test_without_pydantic_ai_the_import_names_the_extra_to_install(monkeypatch):
    package = "airflow.providers.common.ai.durable.pydantic_ai"
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # as if it were not installed
    for name in [name for name in sys.modules if name == package or name.startswith(f"{package}.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(
        AirflowOptionalProviderFeatureException,
        match=r"optional extra \[pydantic-ai\].*providers-common-ai\[pydantic-ai\]",
    ):
        importlib.import_module(package)
