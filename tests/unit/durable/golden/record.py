"""
Record the golden journals: run each scenario of ``scenarios.py`` with ``run_durably_sync`` and
write every entry it leaves in storage, byte for byte, as ``<scenario>/<key>.json``.

Run by hand from the repository root::

    .venv/bin/python tests/unit/durable/golden/record.py          # into golden/format_<FORMAT_VERSION>
    .venv/bin/python tests/unit/durable/golden/record.py DIR      # into DIR, to compare

With ``--pydantic-ai`` first, it records the Pydantic AI adapter's scenarios of
``pydantic_ai_scenarios.py`` (Pydantic AI installed, the extra ``[pydantic-ai]``) into
``golden/pydantic_ai_runs/format_<FORMAT_VERSION>`` (or DIR): a tree of their own, so that the
OpenAI Agents SDK's golden directories stay as they are and record where Pydantic AI is not
installed.

The recording is deterministic (scripted models, fixed call ids, a fixed ``[core] fernet_key``):
every run writes the same bytes. ``tests/unit/durable/core/test_journal_format.py`` records into a
temporary directory and fails when the files differ from the checked-in ones, and replays the
checked-in ones.

A golden directory is never rewritten. When the recording differs, the stored format changed,
whether through a change of the journal's fields or encodings or of what the SDK dumps for its
own types: journals already written by a failed try in that format must still replay, or be set
aside with a log line. So bump ``FORMAT_VERSION`` in ``durable/core/entries.py`` and record a new
directory (``format_<n + 1>``), keep the older ones as they are, and make their tests pin what
this release does with them (replay them, or set them aside as the test of ``format_1`` does).
This script refuses to write over a golden directory that holds something else.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).parent
PYDANTIC_AI_GOLDEN = GOLDEN / "pydantic_ai_runs"


def _quiet_airflow_home() -> None:
    # Before anything imports Airflow, which reads its configuration once: never the user's home.
    if "AIRFLOW_HOME" not in os.environ:
        home = tempfile.mkdtemp(prefix="common-ai-golden-airflow-home-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        os.environ["AIRFLOW_HOME"] = home
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"


def recording(*, pydantic_ai: bool = False) -> dict[str, dict[str, str]]:
    """Each scenario's golden files (of the Pydantic AI adapter's scenarios): file name to text, by scenario name."""
    from scenarios import FERNET_KEY, golden_files, recorded

    if pydantic_ai:
        from pydantic_ai_scenarios import SCENARIOS
    else:
        from scenarios import SCENARIOS

    os.environ["AIRFLOW__CORE__FERNET_KEY"] = FERNET_KEY
    return {scenario.name: dict(golden_files(recorded(scenario))) for scenario in SCENARIOS}


def stored(directory: Path) -> dict[str, dict[str, str]]:
    """The golden files under ``directory``, as :func:`recording` returns them."""
    return {
        scenario.name: {path.name: path.read_text(encoding="utf-8") for path in sorted(scenario.glob("*.json"))}
        for scenario in sorted(directory.iterdir())
        if scenario.is_dir()
    }


def write(files: dict[str, dict[str, str]], directory: Path) -> None:
    for scenario, entries in files.items():
        (directory / scenario).mkdir(parents=True, exist_ok=True)
        for name, text in entries.items():
            # Bytes as the journal stored them: no newline added, UTF-8 whatever the locale.
            (directory / scenario / name).write_bytes(text.encode("utf-8"))


def main(argv: list[str]) -> int:
    _quiet_airflow_home()
    from airflow.providers.common.ai.durable.core.entries import FORMAT_VERSION

    pydantic_ai = argv[1:2] == ["--pydantic-ai"]
    if pydantic_ai:
        argv = argv[:1] + argv[2:]
    files = recording(pydantic_ai=pydantic_ai)
    if len(argv) > 1:
        write(files, Path(argv[1]))
        return 0
    directory = (PYDANTIC_AI_GOLDEN if pydantic_ai else GOLDEN) / f"format_{FORMAT_VERSION}"
    if not directory.exists():
        write(files, directory)
        print(f"Recorded {sum(map(len, files.values()))} entries into {directory}")
        return 0
    if stored(directory) == files:
        print(f"{directory} is what this code records: nothing to do")
        return 0
    print(
        f"{directory} holds something else than this code records: the stored format changed. Bump "
        f"FORMAT_VERSION and record format_{FORMAT_VERSION + 1}; never rewrite a checked-in golden directory",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
