"""Run every benchmark, write `benchmarks/results/latest.json` and print a table.

python -m benchmarks.run            # all
python -m benchmarks.run decode     # those whose module name contains "decode"
python -m benchmarks.run jobs       # bench_jobs (2,000 accounts, ~10 min): only when named
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time

from benchmarks.common import Result
from benchmarks.report import LATEST, markdown_table

MODULES = [
    "bench_decode",
    "bench_requests",
    "bench_percall",
    "bench_blocking",
    "bench_writes",
    "bench_wall",
    "bench_memory",
    "bench_budget",
    "bench_budget_shared",
    "bench_stall",
    "bench_handwritten",
    "bench_scale",
    "bench_accounts",
    "bench_fake",
    "bench_dlt",
]
# Run only when named: minutes long (python -m benchmarks.bench_jobs --quick: a smoke run).
OPTIONAL = ["bench_jobs"]


def table(results: list[Result]) -> str:
    return markdown_table([r.as_dict() for r in results])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Run the benchmarks, print a table and record the rows run in "
        "benchmarks/results/latest.json (rows of benchmarks not run are kept).",
        epilog=f"benchmarks: {', '.join(m.removeprefix('bench_') for m in MODULES)}; "
        f"run only when named: {', '.join(m.removeprefix('bench_') for m in OPTIONAL)}",
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="run only the benchmarks whose module name contains NAME (default: all but "
        "the optional ones)",
    )
    return parser


def chosen_modules(names: list[str]) -> list[str]:
    """The benchmark modules `names` select (all but the optional ones when none)."""
    chosen = [m for m in MODULES if not names or any(a in m for a in names)]
    # Named by their own part ("jobs"), so a broad word such as "bench" leaves them out.
    chosen += [m for m in OPTIONAL if any(a == m or a in m.removeprefix("bench_") for a in names)]
    return chosen


def main(argv: list[str]) -> int:
    """Run the chosen benchmarks; `--help`, or names that choose none, run and write nothing."""
    parser = _parser()
    names = parser.parse_args(argv).names
    chosen = chosen_modules(names)
    if not chosen:
        parser.error(f"no benchmark matches {' '.join(names)}")
    results: list[Result] = []
    started = time.perf_counter()
    for name in chosen:
        t0 = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        results.extend(module.run())
        print(f"{name}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    record(results, time.perf_counter() - started)
    print(table(results))
    return 0 if all(r.met for r in results) else 1


def record(results: list[Result], seconds: float) -> None:
    """Write latest.json: the run's rows replace theirs and the others are kept, so the
    figures of benchmarks not run (the optional fleet runs) stay for the docs' tables."""
    LATEST.parent.mkdir(exist_ok=True)
    fresh = {r.name: r.as_dict() for r in results}
    kept = []
    if LATEST.exists():
        kept = [r for r in json.loads(LATEST.read_text())["results"] if r["name"] not in fresh]
    payload = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "seconds": round(seconds, 1),
        "results": kept + list(fresh.values()),
    }
    LATEST.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
