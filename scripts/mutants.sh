#!/usr/bin/env bash
# Mutation check, run by hand: does every deliberate break of the source fail a unit test?
#
#   bash scripts/mutants.sh [list]            (list: scripts/mutants.txt unless given)
#   AIRFLOW_LINE=3.2 bash scripts/mutants.sh  (against the Airflow 3.2 venv)
#
# The list holds one-line breaks (a label, a file, an exact original text, its replacement; the
# format is described at the top of scripts/mutants.txt). The script copies the tree as it is now
# (git's tracked and untracked, not ignored, files) to a temporary directory, checks that the copy's
# src/ is what Python imports there, runs the unit tests once unbroken (tests that already fail are
# left out of every later run, with a warning), then applies each break to the copy alone, runs
# `pytest -x -q tests/unit` against it, and puts the file back. The working tree is never written.
#
# Output: one line per break, "killed" with the first test that failed, or "SURVIVED"; then a
# summary. Exit status: 0 when every break was killed; 1 when any survived; 2 when the list is out
# of date (an original text not found, or found more than once, or a break that does not compile)
# or the copy would not import its own src/.
#
# Environment: JOBS (breaks tested at once, each in its own copy; default: the number of CPUs, at
# most 4), MUTANT_TIMEOUT (seconds per test run, default 600; a run that times out counts as
# killed), TESTS (the test paths to run, default tests/unit; for example, to see whether some
# files alone catch every break), AIRFLOW_LINE and VENV (as for scripts/test.sh).
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
ensure_venv

LIST="${1:-$ROOT/scripts/mutants.txt}"
export OPENAI_AGENTS_DISABLE_TRACING=1
exec "$VENV/bin/python" - "$ROOT" "$LIST" <<'PYTHON'
import concurrent.futures
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

root, list_path = Path(sys.argv[1]), Path(sys.argv[2])
jobs = int(os.environ.get("JOBS") or min(os.cpu_count() or 1, 4))
timeout = int(os.environ.get("MUTANT_TIMEOUT") or 600)
tests = (os.environ.get("TESTS") or "tests/unit").split()
HEADER = re.compile(r"^\[(?P<label>[^\]]+)\]\s+(?P<path>[^\s#]+)(?:#(?P<occurrence>[1-9][0-9]*))?\s*$")


@dataclass
class Break:
    label: str
    path: str
    original: str
    replacement: str
    line: int  # where it starts in the list
    occurrence: int | None  # which occurrence of the original text; None: it must occur once

    def apply(self, text: str) -> str:
        start = -1
        for _ in range(self.occurrence or 1):
            start = text.index(self.original, start + 1)
        return text[:start] + self.replacement + text[start + len(self.original) :]


def read_list(path: Path) -> tuple[list[Break], list[str]]:
    breaks, problems = [], []
    lines = path.read_text().splitlines()
    number = 0
    while number < len(lines):
        text = lines[number]
        number += 1
        if not text.strip() or text.startswith("#"):
            continue
        header = HEADER.match(text)
        following = lines[number : number + 2]
        if (
            header is None
            or len(following) < 2
            or not following[0].startswith("- ")
            or not (following[1] == "+" or following[1].startswith("+ "))
        ):
            problems.append(f"{path}:{number}: expected '[label] file', '- original', '+ replacement'")
            continue
        original, replacement = following[0][2:], following[1][2:]
        occurrence = int(header["occurrence"]) if header["occurrence"] else None
        breaks.append(Break(header["label"], header["path"], original, replacement, number, occurrence))
        number += 2
    return breaks, problems


def copy_tree(destination: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def environment(copy: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "PYTEST_"))}
    # Ahead of site-packages, so the copy's src/ wins over the editable install of the working tree.
    env.update(PYTHONPATH=str(copy / "src"), AIRFLOW_HOME=str(home), OPENAI_AGENTS_DISABLE_TRACING="1")
    return env


def imported_from(copy: Path, home: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", "import airflow.providers.common.ai as m; print(list(m.__path__)[0])"],
        cwd=copy, env=environment(copy, home), check=True, capture_output=True, text=True,
    ).stdout.strip()


def pytest(copy: Path, home: Path, arguments: list[str]) -> tuple[int | None, str]:
    """Run pytest in ``copy``; the exit code (None on timeout) and the output."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={home}/pytest", *arguments]
    try:
        done = subprocess.run(
            command, cwd=copy, env=environment(copy, home), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stdout + done.stderr


def failures(output: str) -> list[str]:
    """The ids of the tests (or files) a pytest run reports as FAILED or ERROR."""
    found = re.findall(r"^(?:FAILED|ERROR) (\S+)", output, flags=re.MULTILINE)
    return list(dict.fromkeys(found))


def main() -> int:
    breaks, problems = read_list(list_path)
    work = Path(tempfile.mkdtemp(prefix="common-ai-mutants."))
    try:
        pristine = work / "tree"
        copy_tree(pristine)
        for item in breaks:
            file = pristine / item.path
            text = file.read_text() if file.is_file() else None
            found = 0 if text is None else text.count(item.original)
            where = f"{list_path.name}:{item.line} [{item.label}]"
            if text is None:
                problems.append(f"{where}: {item.path} does not exist")
            elif found != 1 if item.occurrence is None else found < item.occurrence:
                wanted = "once" if item.occurrence is None else f"at least {item.occurrence} times"
                problems.append(
                    f"{where}: the original text is {'not found' if not found else f'found {found} times'} in "
                    f"{item.path}, wanted {wanted} (#N after the file picks the N-th): {item.original!r}"
                )
            elif item.path.endswith(".py"):
                try:
                    compile(item.apply(text), item.path, "exec")
                except SyntaxError as error:
                    problems.append(f"{where}: the break does not compile: {error}")
        for problem in problems:
            print(f"OUT OF DATE {problem}")
        runnable = [item for item in breaks if not any(f"[{item.label}]" in p for p in problems)]

        copies: queue.Queue[tuple[Path, Path]] = queue.Queue()
        for number in range(max(1, min(jobs, len(runnable)))):
            copy, home = work / f"copy-{number}", work / f"home-{number}"
            shutil.copytree(pristine, copy)
            home.mkdir()
            copies.put((copy, home))

        copy, home = copies.get()
        where = imported_from(copy, home)
        if not Path(where).is_relative_to(copy):
            print(f"The copy imports airflow.providers.common.ai from {where}, not from its own src/; nothing was tested")
            return 2
        print(f"Testing {len(runnable)} breaks of a copy of {root} in {work} ({jobs} at a time); imports {where}")

        started = time.monotonic()
        code, output = pytest(copy, home, tests)
        copies.put((copy, home))
        already_failing = failures(output) if code != 0 else []
        if code not in (0, 1) or (code == 1 and not already_failing):
            print(f"The unbroken copy's unit tests do not run (pytest exit {code}):\n{output[-3000:]}")
            return 2
        deselect = []
        for test in already_failing:
            print(f"WARNING: fails without any break, left out of every run: {test}")
            deselect += [f"--deselect={test}"] if "::" in test else [f"--ignore={test}"]
        print(f"Unbroken: the unit tests pass in {time.monotonic() - started:.0f} s")

        def run(item: Break) -> tuple[Break, str]:
            copy, home = copies.get()
            file = copy / item.path
            try:
                file.write_text(item.apply((pristine / item.path).read_text()))
                code, output = pytest(copy, home, ["-x", *deselect, *tests])
            finally:
                shutil.copy2(pristine / item.path, file)
                copies.put((copy, home))
            if code is None:
                return item, f"killed    [{item.label}] (timed out after {timeout} s)"
            if code == 0:
                return item, (
                    f"SURVIVED  [{item.label}] {item.path}: {item.original.strip()!r} -> {item.replacement.strip()!r}"
                )
            caught = failures(output)
            by = caught[0] if caught else f"pytest exit {code}"
            return item, f"killed    [{item.label}] by {by}"

        survived = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=copies.qsize()) as pool:
            for item, line in pool.map(run, runnable):
                print(line, flush=True)
                survived += line.startswith("SURVIVED")
        killed = len(runnable) - survived
        print(
            f"{len(breaks)} breaks: {killed} killed, {survived} survived, {len(breaks) - len(runnable)} out of date "
            f"({time.monotonic() - started:.0f} s)"
        )
        if problems:
            return 2
        return 1 if survived else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


sys.exit(main())
PYTHON
