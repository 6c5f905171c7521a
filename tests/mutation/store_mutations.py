"""The Store conformance suite's mutation check: the suite runs against every bug seeded
in `mutants.py` (and against the stores unmutated, which must pass); a bug is caught when
at least one test fails, or when its run crashes or hangs (a store that shares one SQLite
connection between threads can end the process with SIGSEGV). Each store runs in a
process of its own, two at a time, so one crash or hang costs only its own row. Prints
the table (bug, caught by which tests) and the score.

    .venv/bin/python -m tests.mutation.store_mutations     # exit 1 below 95%
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

THRESHOLD = 0.95
MUTANTS_FILE = Path(__file__).with_name("mutants.py")
ROOT = Path(__file__).parents[2]
#: Seconds one store's whole suite may take (the unmutated ones take about 10).
PER_STORE = 240.0
CONTROLS = ("MemoryStore", "SQLiteStore")


class Failures:
    """A pytest plugin collecting the names of the tests that failed."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.append(report.nodeid.split("::")[-1])


def run_one(store: str) -> int:
    """In the child: the suite against one store; its failing tests as one JSON line."""
    failures = Failures()
    pytest.main(
        [
            f"{MUTANTS_FILE}::Test{store}",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "python_files=mutants.py",
            "--no-header",
            "-rN",
            "--tb=no",
        ],
        plugins=[failures],
    )
    print("FAILED " + json.dumps(sorted(set(failures.failed))))
    return 0


def outcome_of(store: str) -> list[str]:
    """The failing tests of `store`'s suite, or why its run ended without answering."""
    command = [sys.executable, "-m", "tests.mutation.store_mutations", "--one", store]
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=PER_STORE, check=False
        )
    except subprocess.TimeoutExpired:
        return [f"(hung past {PER_STORE:g} s)"]
    if done.returncode < 0:
        return [f"(crashed: {signal.Signals(-done.returncode).name})"]
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("FAILED "):
            failed: list[str] = json.loads(line.removeprefix("FAILED "))
            return failed
    return [f"(ended without an answer, exit {done.returncode})"]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        return run_one(argv[1])
    from tests.mutation.mutants import MUTANTS

    stores = [*CONTROLS, *(mutant.__name__ for mutant in MUTANTS)]
    with ThreadPoolExecutor(2) as pool:
        outcomes = dict(zip(stores, pool.map(outcome_of, stores), strict=True))
    for control in CONTROLS:
        if outcomes[control]:
            print(f"the unmutated {control} fails: {outcomes[control]}")
            return 2
    print("\n| bug | store | what | caught by |\n|---|---|---|---|")
    caught = 0
    for mutant in MUTANTS:
        failing = outcomes[mutant.__name__]
        caught += bool(failing)
        by = ", ".join(f"`{t.removeprefix('test_')}`" for t in failing) or "**not caught**"
        doc = (mutant.__doc__ or "").strip()
        print(f"| {mutant.__name__} | {mutant.__mro__[1].__name__} | {doc} | {by} |")
    score = caught / len(MUTANTS)
    print(f"\nmutation score: {caught}/{len(MUTANTS)} = {score:.0%} (at least {THRESHOLD:.0%})")
    return 0 if score >= THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
