"""
Requirement ids (``R-56``) cited in the code, the docs and the tests are defined in
docs/requirements.rst, each once, so that a reader can look up any id they meet.

A definition there is a label and a term of the same id (``.. _R-56:`` then ``R-56``). Read from the
files as text: nothing is imported.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).parents[2]
REQUIREMENTS = ROOT / "docs" / "requirements.rst"
#: Where ids are cited: the code, its docs (but the page that defines them) and its tests.
CITING_ROOTS = ("src", "docs", "tests")
#: Folders of generated files, not written by anyone.
SKIPPED_FOLDERS = {"__pycache__", "_build", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
CITATION = re.compile(r"\bR-(\d+)\b")
LABEL = re.compile(r"^\.\. _R-(\d+):$", re.MULTILINE)
#: A label, a blank line and the term it labels.
DEFINITION = re.compile(r"^\.\. _R-(\d+):\n\n(.*)$", re.MULTILINE)


def _cited_ids(root: Path, skip: Path) -> dict[int, list[str]]:
    """Each id cited in a text file under ``root``'s citing folders, with the files that cite it."""
    cited: dict[int, list[str]] = {}
    for folder in CITING_ROOTS:
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or path == skip or SKIPPED_FOLDERS.intersection(path.parts):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # an image
                continue
            for number in {int(found) for found in CITATION.findall(text)}:
                cited.setdefault(number, []).append(str(path.relative_to(root)))
    return cited


def _defined_ids(text: str) -> list[int]:
    return [int(found) for found in LABEL.findall(text)]


def _undefined_citations(root: Path, requirements: Path) -> dict[str, list[str]]:
    defined = set(_defined_ids(requirements.read_text(encoding="utf-8")))
    return {
        f"R-{number}": files
        for number, files in sorted(_cited_ids(root, skip=requirements).items())
        if number not in defined
    }


def test_every_requirement_id_cited_in_the_code_docs_and_tests_is_defined():
    assert _cited_ids(ROOT, skip=REQUIREMENTS), "no requirement id found in src/, docs/ or tests/: the scan is broken"

    undefined = _undefined_citations(ROOT, REQUIREMENTS)

    assert not undefined, f"cited but not defined in docs/requirements.rst (add them there): {undefined}"


def test_each_requirement_id_is_defined_once_under_its_own_term():
    text = REQUIREMENTS.read_text(encoding="utf-8")
    defined = _defined_ids(text)

    assert defined, "docs/requirements.rst defines no requirement id"
    assert not [f"R-{n}" for n, count in Counter(defined).items() if count > 1], "an id is defined twice"
    definitions = DEFINITION.findall(text)
    assert len(definitions) == len(defined), "a label is not followed by a blank line and its term"
    mislabelled = [(f"R-{n}", term) for n, term in definitions if term != f"R-{n}"]
    assert not mislabelled, f"labels over another id's term: {mislabelled}"


def test_an_id_cited_in_a_test_but_not_defined_is_reported(tmp_path):
    requirements = tmp_path / "docs" / "requirements.rst"
    requirements.parent.mkdir()
    requirements.write_text(".. _R-1:\n\nR-1\n   Defined.\n", encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "module.py").write_text(f"# Cites a defined id (R-{1}).\n", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_it.py").write_text(f"# Cites R-{2} and R-{1}..R-{3}.\n", encoding="utf-8")

    assert _undefined_citations(tmp_path, requirements) == {
        f"R-{2}": ["tests/test_it.py"],
        f"R-{3}": ["tests/test_it.py"],
    }
