"""
The durable tests mirror the source: ``core/``, ``airflow/`` and ``openai_agents/``. A test goes
where its subject is: one that runs the OpenAI adapter end to end to check a rule of the core
(replay, masking, in-flight policies) is a core test. Helpers shared by all three stay here.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

# The tests import the helpers beside this file by name (``import tries``, ``durable_backends``,
# ``mcp_servers``, ``golden.scenarios``): pytest's "prepend" import mode puts this folder on
# sys.path as it imports this conftest; this keeps the helpers found whatever the import mode.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from durable_backends import FakeTaskStateStore, make_storage

from airflow.providers.common.ai.durable.core.storage import InMemoryStorage

BACKENDS = ["memory", "file", "fsspec-memory", "task-state-store"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The name of a storage backend; every backend passes the same behaviour suite."""
    return request.param


@pytest.fixture
def new_storage(backend, tmp_path):
    """Returns storage of ``backend`` over the same place each call: one object per try."""
    accessor = FakeTaskStateStore()
    shared = InMemoryStorage() if backend == "memory" else None

    def factory():
        return shared if shared is not None else make_storage(backend, tmp_path, accessor)

    yield factory
    if backend == "fsspec-memory":
        from fsspec.implementations.memory import MemoryFileSystem

        MemoryFileSystem.store.clear()
        MemoryFileSystem.pseudo_dirs[:] = [""]


@pytest.fixture
def fernet_key(monkeypatch):
    """Sets ``[core] fernet_key`` ("" for none) for the test; encryption and fingerprints read it as they go."""

    def use(value: str) -> None:
        monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", value)

    return use


@pytest.fixture
def no_collection_at_depth():
    """The SDK turns a 900-deep output into text a few frames short of the recursion limit. A
    garbage collection that falls there (when depends on the tests before) runs some unrelated
    object's finalizer with no stack left: its RecursionError is "ignored" by Python but fails the
    test through pytest's unraisable hook. Collections wait until the test's end instead."""
    gc.disable()
    yield
    gc.enable()
    gc.collect()
