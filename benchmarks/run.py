"""Run every benchmark, write `benchmarks/results/latest.json` and print a table.

python -m benchmarks.run            # all
python -m benchmarks.run decode     # those whose module name contains "decode"
python -m benchmarks.run jobs       # bench_jobs (2,000 accounts, ~10 min): only when named
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
from pathlib import Path

from benchmarks.common import Result

MODULES = [
    "bench_decode",
    "bench_requests",
    "bench_percall",
    "bench_wall",
    "bench_memory",
    "bench_budget",
    "bench_budget_shared",
    "bench_stall",
    "bench_handwritten",
    "bench_accounts",
    "bench_fake",
]
# Run only when named: minutes long (python -m benchmarks.bench_jobs --quick: a smoke run).
OPTIONAL = ["bench_jobs"]
RESULTS = Path(__file__).parent / "results"


def table(results: list[Result]) -> str:
    lines = [
        "| benchmark | ours | bound / baseline | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        sign = ">=" if r.higher_is_better else "<="
        target = "-" if r.informational else f"{sign} {r.target:g}"
        met = "n/a" if r.informational else ("yes" if r.met else "NO")
        lines.append(
            f"| {r.name} | {r.ours:.4g} {r.unit} | {r.baseline:.4g} {r.unit} | "
            f"{r.ratio:.3f} | {target} | {met} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    chosen = [m for m in MODULES if not argv or any(a in m for a in argv)]
    # Named by their own part ("jobs"), so a broad word such as "bench" leaves them out.
    chosen += [m for m in OPTIONAL if any(a == m or a in m.removeprefix("bench_") for a in argv)]
    results: list[Result] = []
    started = time.perf_counter()
    for name in chosen:
        t0 = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        results.extend(module.run())
        print(f"{name}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    record(results, time.perf_counter() - started, partial=bool(argv))
    print(table(results))
    return 0 if all(r.met for r in results) else 1


def record(results: list[Result], seconds: float, *, partial: bool) -> None:
    """Write latest.json; a partial run updates its rows and keeps the others."""
    RESULTS.mkdir(exist_ok=True)
    fresh = {r.name: r.as_dict() for r in results}
    latest = RESULTS / "latest.json"
    kept = []
    if partial and latest.exists():
        kept = [r for r in json.loads(latest.read_text())["results"] if r["name"] not in fresh]
    payload = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "seconds": round(seconds, 1),
        "results": kept + list(fresh.values()),
    }
    latest.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
