"""
The verdict of scripts/sdk_conformance.sh: counts per mode, failures against the allowed list.

    python summarize.py --results DIR --allowed FILE --sdk-version V --source S MODE...

Reads DIR/MODE.jsonl (written by the durable_conformance plugin), prints per mode the passed and
failed counts and each failing test id with the first line of its error, marks the failures
listed for that mode in the allowed file, writes the report to DIR/summary.md, and exits 1 when
a failure (a retry mismatch, in mode retry) is not allowed, or a test listed as allowed passes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

# In mode retry the test's own asserts see the retry's second round of hooks and spans: only the
# comparison of the two runs is the verdict there.
GATED_BY_TESTS = ("shipped", "outside", "journal")


def read_allowed(path: Path) -> dict[str, dict[str, str]]:
    """Mode -> test id -> reason, from lines ``modes  test-id  reason`` (modes comma-separated)."""
    allowed: dict[str, dict[str, str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3:
            raise SystemExit(f"{path}:{number}: write 'modes  test-id  reason', the reason included")
        modes, test, reason = parts
        for mode in modes.split(","):
            allowed.setdefault(mode, {})[test] = reason.strip()
    return allowed


def first_error_line(failure: str) -> str:
    # pytest's "E " lines, else the exception line that ends a native traceback.
    lines = [line[1:].strip() for line in failure.splitlines() if line.startswith("E ")]
    if not lines:
        lines = [line for line in failure.splitlines() if line.strip() and not line.startswith((" ", "["))][-1:]
    text = lines[0] if lines else ""
    return re.sub(r"\s+", " ", text)[:160]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--allowed", type=Path, required=True)
    parser.add_argument("--sdk-version", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("modes", nargs="+")
    args = parser.parse_args()
    allowed = read_allowed(args.allowed)

    out: list[str] = [
        f"# SDK conformance, {datetime.date.today().isoformat()}",
        "",
        f"openai-agents {args.sdk_version} tests; provider: {args.source}",
        "",
        "| mode | tests | passed | failed | allowed | unexplained | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    unexplained_total = 0
    stale_total = 0
    for mode in args.modes:
        path = args.results / f"{mode}.jsonl"
        if not path.exists():
            out.append(f"| {mode} | no results ({path} is missing) | | | | | |")
            unexplained_total += 1
            continue
        tests = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        seconds_file = args.results / f"{mode}.seconds"
        seconds = seconds_file.read_text().strip() if seconds_file.exists() else "?"
        outcomes = Counter(test["outcome"] for test in tests)
        failed = [test for test in tests if test["outcome"] == "failed"]
        permitted = allowed.get(mode, {})
        if mode in GATED_BY_TESTS:
            judged = failed
            ids = {test["test"] for test in failed}
        else:
            judged = [
                test for test in tests if any(note["retry"] == "mismatch" for note in test["retry"]) or hung(test)
            ]
            ids = {test["test"] for test in judged}
        allowed_here = [test for test in judged if test["test"] in permitted]
        unexplained = [test for test in judged if test["test"] not in permitted]
        unexplained_total += len(unexplained)
        out.append(
            f"| {mode} | {len(tests)} | {outcomes['passed']} | {outcomes['failed']} | {len(allowed_here)} "
            f"| {len(unexplained)} | {seconds} |"
        )
        details += ["", f"## {mode}", ""]
        if mode == "retry":
            notes = Counter(note["retry"] for test in tests for note in test["retry"])
            stopped = sum(
                1 for test in tests for note in test["retry"] if note["retry"] == "same" and note.get("interruptions")
            )
            skipped = Counter(note["reason"] for test in tests for note in test["retry"] if note["retry"] == "skipped")
            details.append(
                f"Runs retried over the same storage: {notes['started']} "
                f"({notes['same']} the same, {notes['mismatch']} mismatched, "
                f"{notes['started'] - notes['same'] - notes['mismatch']} did not finish; "
                f"{stopped} of the same stopped for approvals, as the first run did); not retried: "
                + (", ".join(f"{n} ({reason})" for reason, n in skipped.most_common()) or "none")
                + f". Tests failing on their own asserts (information only): {outcomes['failed']}."
            )
            details.append("")
        label = "retry mismatches" if mode == "retry" else "failures"
        details.append(f"Unexplained {label} ({len(unexplained)}):")
        details.append("")
        for test in sorted(unexplained, key=lambda t: t["test"]):
            details.append(f"- `{test['test']}`: {describe(mode, test)}")
        if allowed_here:
            details += ["", f"Allowed {label} ({len(allowed_here)}):", ""]
            for test in sorted(allowed_here, key=lambda t: t["test"]):
                details.append(f"- `{test['test']}`: {permitted[test['test']]}")
        # Only tests that ran: a run of some files (--files) leaves the others out.
        stale = sorted((set(permitted) - ids) & {test["test"] for test in tests})
        if stale:
            stale_total += len(stale)
            details += [
                "",
                f"Listed as allowed in {mode} but did not fail: remove them from the list ({len(stale)}):",
                "",
            ]
            details += [f"- `{test}`" for test in stale]

    report = "\n".join(out + details) + "\n"
    (args.results / "summary.md").write_text(report, encoding="utf-8")
    print()
    print(report)
    print(f"(also in {args.results / 'summary.md'})")
    if unexplained_total:
        print(
            f"{unexplained_total} unexplained failures or mismatches: fix them or list them with a reason in {args.allowed}"
        )
    if stale_total:
        print(f"{stale_total} tests listed in {args.allowed} pass now: remove their lines")
    return 1 if unexplained_total or stale_total else 0


def hung(test: dict[str, Any]) -> bool:
    """Whether a retry started and never reached its comparison (a hang the timeout ended)."""
    notes = Counter(note["retry"] for note in test["retry"])
    return notes["started"] > notes["same"] + notes["mismatch"]


def describe(mode: str, test: dict[str, Any]) -> str:
    if mode != "retry":
        return first_error_line(test.get("failure", ""))
    parts = []
    for note in test["retry"]:
        if note["retry"] != "mismatch":
            continue
        fields = ", ".join(f"{f}: {note['first'][f][:60]} -> {note['second'][f][:100]}" for f in note["fields"])
        parts.append(f"{fields} (ran live {note['ran_live']})")
    if hung(test):
        parts.append(f"a retry did not finish: {first_error_line(test.get('failure', ''))}")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
