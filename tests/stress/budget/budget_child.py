"""One process of a shared budget, for the multi-process tests and benchmark.

argv: base_url user password shared_url limit period callers seconds [most]. Runs
`callers` concurrent callers on one client for `seconds` (0: until the budget says no, or
`most` requests were answered), and prints
one JSON line: requests answered, refused locally, refused by the server, and the
latency of each round trip that took (or was refused) a unit, in seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import invoicing_async as ia
from invoicing_async._budget.budget import spender_of


async def main(argv: list[str]) -> None:
    base_url, user, password, shared = argv[:4]
    limit, period, callers, seconds = int(argv[4]), float(argv[5]), int(argv[6]), float(argv[7])
    most = int(argv[8]) if len(argv) > 8 else None
    budget = ia.RateBudget(limit, period, shared=shared, key="acme")
    counts = {"ok": 0, "local": 0, "server": 0}
    latencies: list[float] = []

    def record(event: ia.RequestEvent) -> None:
        if event.status == 403:
            counts["server"] += 1

    async with ia.InvoicingClient(
        base_url,
        auth=ia.BasicAuth(user, password),
        budget=budget,
        max_wait=0 if seconds == 0 else None,
        on_request=record,
        retry=ia.RetryPolicy(attempts=1),
    ) as client:
        # Time each round trip to the store that takes a unit (waiting is not counted).
        store = spender_of(budget).store  # measuring the store itself
        take = store.take

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await take(*args, **kwargs)
            finally:
                latencies.append(time.perf_counter() - started)

        store.take = timed  # type: ignore[method-assign]
        await budget.refresh()  # connect (and create the schema) before the clock starts
        print("ready", flush=True)
        sys.stdin.readline()  # every process starts at once
        deadline = time.monotonic() + seconds

        async def caller() -> None:
            while seconds == 0 or time.monotonic() < deadline:
                if most is not None and counts["ok"] >= most:
                    return
                try:
                    await client.current_session()
                    counts["ok"] += 1
                except ia.RateLimitExceeded as exc:
                    if exc.status == 0:
                        counts["local"] += 1
                    if seconds == 0:
                        return

        await asyncio.gather(*(caller() for _ in range(callers)))
    await budget.close()
    print(json.dumps({**counts, "latencies": latencies}), flush=True)


async def run_children(args: list[str], processes: int, *, cwd: Path) -> list[dict[str, Any]]:
    """Start `processes` children with `args`, let them go at once, return their reports."""
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.stress.budget.budget_child",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=cwd,
        )
        for _ in range(processes)
    ]
    for child in children:
        assert child.stdout is not None
        assert await asyncio.wait_for(child.stdout.readline(), 60) == b"ready\n"
    for child in children:  # all start together
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        await child.stdin.drain()
    reports = []
    for child in children:
        out, _ = await asyncio.wait_for(child.communicate(), 120)
        assert child.returncode == 0
        reports.append(json.loads(out.decode().strip().splitlines()[-1]))
    return reports


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
