"""The package refuses, at import, the ASF provider of the same name installed beside it (issue 37)."""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path

import pytest

import airflow.providers.common
import airflow.providers.common.ai as package
from airflow.providers.common.ai import _mixed_install


def _fake_asf_files(folder: Path) -> Path:
    """The ASF provider's ``ai`` folder as its 1.0.0 wheel lays it out, reduced to two of its files."""
    ai = folder / "airflow" / "providers" / "common" / "ai"
    (ai / "durable").mkdir(parents=True)
    (ai / "skills.py").write_text("")
    (ai / "durable" / "openai_agents.py").write_text("")
    return ai


def test_this_provider_alone_is_not_refused():
    assert _mixed_install.asf_provider_files(_mixed_install.package_dirs(package.__path__)) == []


def test_no_file_of_the_asf_list_is_one_this_provider_ships():
    own = Path(package.__file__).parent
    assert [name for name in _mixed_install.ASF_ONLY_FILES if (own / name).exists()] == []


def test_asf_files_in_this_packages_folder_are_found(tmp_path):
    ai = _fake_asf_files(tmp_path)
    assert _mixed_install.asf_provider_files([str(ai)]) == [
        str(ai / "skills.py"),
        str(ai / "durable" / "openai_agents.py"),
    ]


def test_the_import_fails_naming_both_providers_and_the_fix_when_the_asf_files_are_on_the_path(tmp_path, monkeypatch):
    # Another site directory holding the ASF provider, as a second entry of the namespace path.
    _fake_asf_files(tmp_path)
    parent = airflow.providers.common
    monkeypatch.setattr(parent, "__path__", [*parent.__path__, str(tmp_path / "airflow" / "providers" / "common")])
    try:
        with pytest.raises(ImportError) as refused:
            importlib.reload(package)
    finally:
        monkeypatch.undo()
        importlib.reload(package)
    message = str(refused.value)
    assert message.startswith(
        f"apache-airflow-providers-common-ai {package.__version__} (durable agent tasks, at {package.__path__[0]})"
        " is installed together with the ASF provider published under the same name"
    )
    assert str(tmp_path / "airflow" / "providers" / "common" / "ai" / "skills.py") in message
    assert "Uninstall both" in message and "docs/quickstart.rst" in message


def test_the_asf_list_names_files_the_asf_wheel_ships(tmp_path):
    """Where the ASF wheel was downloaded to /tmp/asf, the list is checked against what it ships."""
    wheel = next(Path("/tmp/asf").glob("apache_airflow_providers_common_ai-1.*.whl"), None)
    if wheel is None:
        pytest.skip(
            "no ASF wheel in /tmp/asf: pip download --no-deps apache-airflow-providers-common-ai==1.0.0 -d /tmp/asf"
        )
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [n for n in _mixed_install.ASF_ONLY_FILES if f"airflow/providers/common/ai/{n}" not in names] == []
