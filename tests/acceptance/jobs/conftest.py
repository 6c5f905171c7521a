"""The fleet tests' shared fixture: a PostgreSQL database migrated by `db migrate`."""

from __future__ import annotations

import pytest

from invoicing_async._cli import main


@pytest.fixture
def migrated(postgres_url: str) -> str:
    """`postgres_url` with our tables and procrastinate's, made by the command users run."""
    assert main(["db", "migrate", "--database-url", postgres_url]) == 0
    return postgres_url
