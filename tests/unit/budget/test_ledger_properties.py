"""The indexed ledger against the reference rule, over random schedules of takes,
settles, refusals for the budget (403) and the server's `X-RateLimit-Remaining`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing_async._budget.ledger import Grant, MemoryLedger, Refusal
from tests.unit.budget.ledger_reference import ReferenceLedger

PERIOD = 100.0

step = st.one_of(
    st.tuples(st.just("take"), st.sampled_from([0.0, 5.0, 50.0]), st.integers(0, 3)),
    st.tuples(
        st.just("settle"),
        st.integers(0, 1000),  # which unit out (modulo how many)
        st.booleans(),  # sent
        st.one_of(st.none(), st.integers(-2, 12)),  # remaining (0: refused for the budget)
    ),
    # Time passes; 0 keeps several operations on one instant (a coarse clock).
    st.tuples(st.just("wait"), st.sampled_from([0.0, 0.0, 0.5, 7.0, 40.0, 99.0, 150.0])),
)


@given(limit=st.integers(1, 12), steps=st.lists(step, max_size=80))
def test_the_indexed_ledger_follows_the_reference_rule(
    limit: int, steps: list[tuple[object, ...]]
) -> None:
    new = MemoryLedger(limit, PERIOD)
    old = ReferenceLedger(limit, PERIOD)
    now = 0.0
    out: list[tuple[Grant, Grant]] = []  # (new's grant, old's grant) for the same request
    for action in steps:
        if action[0] == "take":
            _, hold, keep = action
            assert isinstance(hold, float)
            assert isinstance(keep, int)
            keep = min(keep, limit - 1)
            got_new = new.take(now, hold=hold, keep=keep)
            got_old = old.take(now, hold=hold, keep=keep)
            if isinstance(got_old, Refusal):
                assert got_new == got_old
            else:
                assert isinstance(got_new, Grant)
                assert got_new.taken_at == got_old.taken_at
                out.append((got_new, got_old))
        elif action[0] == "settle" and out:
            _, which, sent, remaining = action
            assert isinstance(which, int)
            assert isinstance(sent, bool)
            assert remaining is None or isinstance(remaining, int)
            grant_new, grant_old = out.pop(which % len(out))
            new.settle(now, grant_new.unit, grant_new.taken_at, sent=sent, remaining=remaining)
            old.settle(now, grant_old.unit, grant_old.taken_at, sent=sent, remaining=remaining)
        elif action[0] == "wait":
            wait = action[1]
            assert isinstance(wait, float)
            now += wait
        assert new.view(now) == old.view(now), action


_FORKED_IDS = """
import os
from invoicing_async._budget.ledger import new_unit_id
new_unit_id()  # the parent's generator is in use before the fork
read, write = os.pipe()
if os.fork() == 0:
    os.write(write, " ".join(new_unit_id() for _ in range(1000)).encode())
    os._exit(0)
os.close(write)
child = b""
while chunk := os.read(read, 65536):
    child += chunk
os.wait()
print(child.decode())
print(" ".join(new_unit_id() for _ in range(1000)))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_process_does_not_repeat_its_parents_unit_ids() -> None:
    """Processes sharing a SQLite ledger tell units apart by id: a child forked after
    the parent drew ids must not draw the same ones (forked from a fresh interpreter,
    which has one thread)."""
    run = subprocess.run(
        [sys.executable, "-c", _FORKED_IDS], capture_output=True, text=True, check=True
    )
    child, parent = (set(line.split()) for line in run.stdout.splitlines())
    assert len(child) == len(parent) == 1000
    assert not child & parent
    assert all(len(i) == 17 and i[0] == "r" for i in child | parent)
