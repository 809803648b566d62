"""
``airflow common-ai journal export|fork|clean-up``: a task instance's journal as one file, a fork of
one into a task instance, and the removal of kept journals whose retention passed.

Registered through the provider's ``cli`` entry (:func:`get_cli_commands`) on Airflow 3.2+; on
Airflow 2.11, which takes CLI commands only from executors and auth managers, the same commands run
as ``python -m airflow.providers.common.ai.cli.journal export|fork|clean-up ...``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: Each command's arguments: (flags, argparse options), shared by Airflow's CLI and ``python -m``.
_TASK_INSTANCE: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("dag_id",), {"help": "The id of the DAG"}),
    (("task_id",), {"help": "The id of the task"}),
    (("run_id",), {"help": "The id of the DAG run"}),
    (("--map-index",), {"type": int, "default": -1, "help": "The map index of a mapped task instance (default -1)"}),
]
_EXPORT = [
    *_TASK_INSTANCE,
    (
        ("--source",),
        {
            "choices": ("auto", "journal", "kept"),
            "default": "auto",
            "help": "The working journal (journal), the one kept after success (kept), or the first that exists (auto)",
        },
    ),
    (("-o", "--output"), {"default": "-", "help": "The file to write (default: standard output)"}),
]
_FORK = [
    *_TASK_INSTANCE,
    (("--from",), {"dest": "from_file", "required": True, "help": "A journal file written by export"}),
    (("--step",), {"type": int, "required": True, "help": "How many steps to keep: the next try replays 1..STEP"}),
    (("--no-clear",), {"action": "store_true", "help": "Write the journal without clearing the task instance"}),
]
_HELP = {
    "export": "Write a task instance's journal (working or kept) as one JSON file",
    "fork": "Make the first steps of a journal file a task instance's journal, and clear the task instance",
    "clean-up": "Delete the kept journals whose retention (common.ai kept_journal_retention_days) has passed",
}
_DESCRIPTION = {
    "export": (
        "Writes the journal of a task instance as one self-contained JSON file (schema "
        "apache-airflow-providers-common-ai/journal, version 1): each step decrypted with the core fernet_key option, "
        "the steps no key decrypts named. Secrets stay masked as they were recorded."
    ),
    "fork": (
        "Keeps the first STEP steps of a journal file as the journal of the task instance and clears it: its "
        "next try replays steps 1..STEP and runs live from STEP+1. Refused while the task instance runs."
    ),
    "clean-up": "Kept journals in the task state store expire by themselves; those kept as objects are deleted here.",
}


def _task_instance(args: argparse.Namespace) -> Any:
    from airflow.providers.common.ai.durable.airflow.journal_access import TaskInstanceId

    return TaskInstanceId(args.dag_id, args.run_id, args.task_id, args.map_index)


def _refused(error: Exception) -> SystemExit:
    return SystemExit(f"error: {error}")


def export_command(args: argparse.Namespace) -> None:
    """``export``: the journal file of a task instance, to ``--output`` or standard output."""
    from airflow.providers.common.ai.durable.airflow.journal_commands import export_journal
    from airflow.providers.common.ai.durable.core.journal_file import journal_file_text

    try:
        document = export_journal(_task_instance(args), source=args.source)
    except ValueError as error:
        raise _refused(error) from None
    text = journal_file_text(document)
    if args.output == "-":
        sys.stdout.write(text)
        return
    with open(args.output, "w", encoding="utf-8") as file:
        file.write(text)
    print(
        f"Exported {len(document['steps'])} steps of {_task_instance(args)} ({document['source']}) to {args.output}"
        + (f"; {len(document['not_decrypted'])} could not be decrypted" if document["not_decrypted"] else "")
    )


def fork_command(args: argparse.Namespace) -> None:
    """``fork``: the first ``--step`` steps of ``--from`` as the task instance's journal, and a clear."""
    from airflow.providers.common.ai.durable.airflow.journal_commands import fork_journal

    try:
        with open(args.from_file, encoding="utf-8") as file:
            text = file.read()
        fork_journal(_task_instance(args), text, args.step, name=args.from_file, clear=not args.no_clear)
    except OSError as error:
        raise SystemExit(f"error: cannot read {args.from_file}: {error.strerror}") from None
    except ValueError as error:
        raise _refused(error) from None
    then = "" if args.no_clear else ", and cleared it: its next try replays them and runs live after"
    print(f"Wrote steps 1..{args.step} of {args.from_file} as the journal of {_task_instance(args)}{then}")


def clean_up_command(args: argparse.Namespace) -> None:
    """``clean-up``: delete the kept journals whose retention passed."""
    from airflow.providers.common.ai.durable.airflow.kept_journals import remove_expired

    removed = remove_expired()
    print(f"Deleted {len(removed)} kept journals whose retention passed")


_FUNCTIONS = {"export": export_command, "fork": fork_command, "clean-up": clean_up_command}
_ARGS = {"export": _EXPORT, "fork": _FORK, "clean-up": []}


def get_cli_commands() -> list[Any]:
    """The provider's ``airflow common-ai`` commands, for Airflow's CLI (the provider's ``cli`` entry)."""
    from airflow.cli.cli_config import ActionCommand, Arg, GroupCommand, lazy_load_command

    commands = [
        ActionCommand(
            name=name,
            help=_HELP[name],
            description=_DESCRIPTION[name],
            func=lazy_load_command(f"{__name__}.{_FUNCTIONS[name].__name__}"),
            args=tuple(Arg(flags, **options) for flags, options in _ARGS[name]),
        )
        for name in _FUNCTIONS
    ]
    journal = GroupCommand(name="journal", help="Durable agent journals: export, fork, clean-up", subcommands=commands)
    return [GroupCommand(name="common-ai", help="The Common AI provider's commands", subcommands=[journal])]


def parser() -> argparse.ArgumentParser:
    """The same commands as an argparse parser of their own, for ``python -m`` (Airflow 2.11)."""
    main = argparse.ArgumentParser(prog="python -m airflow.providers.common.ai.cli.journal")
    commands = main.add_subparsers(dest="command", required=True)
    for name, function in _FUNCTIONS.items():
        command = commands.add_parser(name, help=_HELP[name], description=_DESCRIPTION[name])
        for flags, options in _ARGS[name]:
            command.add_argument(*flags, **options)
        command.set_defaults(func=function)
    return main


if __name__ == "__main__":
    parsed = parser().parse_args()
    parsed.func(parsed)
