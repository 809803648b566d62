"""
docs/fixtures.rst shows each ``journal`` command's ``--help`` as the code writes it (argparse's, at
100 columns): this fails when an option, a help text or a description changed and the page did
not. ``python tests/unit/test_journal_cli_help.py`` prints the blocks to paste into the page.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow.providers.common.ai.cli.journal import parser

DOCS = Path(__file__).parents[2] / "docs" / "fixtures.rst"
COMMANDS = ("export", "fork", "clean-up")


def help_block(name: str) -> str:
    """The command's ``--help`` as the page shows it: the command line, then its output indented by three."""
    os.environ["COLUMNS"] = "100"
    [commands] = [action for action in parser()._actions if action.__class__.__name__ == "_SubParsersAction"]
    text = commands.choices[name].format_help()
    lines = [f"$ python -m airflow.providers.common.ai.cli.journal {name} --help", *text.rstrip("\n").splitlines()]
    return "\n".join(f"   {line}".rstrip() for line in lines)


@pytest.mark.parametrize("name", COMMANDS)
def test_the_docs_show_the_help_the_command_writes(name, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert help_block(name) in DOCS.read_text(encoding="utf-8"), (
        f"docs/fixtures.rst does not show what `{name} --help` writes now: paste the output of "
        "python tests/unit/test_journal_cli_help.py"
    )


if __name__ == "__main__":
    for command in COMMANDS:
        print(".. code-block:: text\n")
        print(help_block(command) + "\n")
