"""The chaos run, small enough for CI: a writer under the issue's faults, SIGKILLed and
restarted, on a SQLite and a PostgreSQL journal in both formats: no duplicate, no loss."""

from __future__ import annotations

from pathlib import Path

import pytest

import invoicing_async as ia
from tests.integration.writes.chaos import chaos_run
from tests.servers import POSTGRES

pytestmark = [pytest.mark.reliability, pytest.mark.stress]

CREATES, FOLLOWUPS, KILLS = 400, 80, 6


@pytest.mark.parametrize("fmt", ["xml", "json"])
@pytest.mark.parametrize("store", ["sqlite", POSTGRES])
async def test_chaos_no_duplicates_no_losses(
    tmp_path: Path,
    store: str,
    fmt: ia.Format,
    request: pytest.FixtureRequest,
) -> None:
    if store == "postgres":
        journal = str(request.getfixturevalue("postgres_url"))
    else:
        journal = f"sqlite:///{tmp_path / 'writes.sqlite3'}"
    row = await chaos_run(tmp_path, journal, fmt, creates=CREATES, followups=FOLLOWUPS, kills=KILLS)
    print(row)
    assert row["duplicates"] == {"invoices": 0, "emails": 0, "payments": 0}
    assert row["losses"] == 0
    assert row["per ambiguous send/reminder/payment"] <= 1.5
