"""
Refuses, at import, this provider installed together with the ASF provider of the same name.

The Apache Software Foundation publishes another project as ``apache-airflow-providers-common-ai``
(1.0.0 and later): same distribution name, same module paths, a higher version than this one.
Installed side by side (two site directories, or one installer's files left under the other's),
the two share ``airflow.providers.common.ai`` and whichever module is found first runs, so a DAG
fails far from the cause. A few files that only the ASF provider ships tell it apart: a stat
each, in this package's folders and in the ``ai`` folder of every other entry of
``airflow.providers.common``'s path. When the ASF provider's ``__init__`` is the one found, this
module never runs; docs/quickstart.rst says how to install this provider so that cannot happen.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

DISTRIBUTION = "apache-airflow-providers-common-ai"

# Files of apache-airflow-providers-common-ai 1.0.0 (the ASF provider) that this provider never
# ships; durable/openai_agents.py is a module there and a package here.
ASF_ONLY_FILES = ("skills.py", "exceptions.py", "observability.py", "batch/__init__.py", "durable/openai_agents.py")


def asf_provider_files(package_dirs: Iterable[str]) -> list[str]:
    """The files of the ASF provider found in ``package_dirs`` (folders of ``airflow/providers/common/ai``)."""
    return [
        path
        for folder in dict.fromkeys(os.path.abspath(d) for d in package_dirs)
        for name in ASF_ONLY_FILES
        if os.path.isfile(path := os.path.join(folder, *name.split("/")))
    ]


def package_dirs(own_path: Iterable[str]) -> list[str]:
    """This package's folders, then the ``ai`` folder of each entry of its parent package's path."""
    parent = sys.modules.get("airflow.providers.common")
    siblings = [os.path.join(entry, "ai") for entry in getattr(parent, "__path__", ())]
    return [*own_path, *siblings]


def refuse_a_mixed_install(own_path: Iterable[str], version: str) -> None:
    """Raise ``ImportError`` naming both providers and the fix when the ASF provider's files are present."""
    own_path = list(own_path)
    found = asf_provider_files(package_dirs(own_path))
    if not found:
        return
    raise ImportError(
        f"{DISTRIBUTION} {version} (durable agent tasks, at {', '.join(own_path)}) is installed together "
        f"with the ASF provider published under the same name, {DISTRIBUTION} 1.0.0 or later (its files: "
        f"{', '.join(found)}); the two share module paths, so neither runs as written. Uninstall both "
        f"(pip uninstall {DISTRIBUTION}, repeated until pip finds none, and delete any of those files that "
        "remain), then install one: this provider from its checkout or the wheel it builds "
        "(docs/quickstart.rst, 'Install'), or the ASF provider alone."
    )
