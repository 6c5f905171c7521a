"""Collects what each reliability scenario tried and what held, and prints it as the table
the README shows (`pytest -m reliability`)."""

from __future__ import annotations

import pytest

ROWS: list[dict[str, object]] = []


@pytest.fixture
def record() -> list[dict[str, object]]:
    return ROWS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ROWS:
        return
    terminalreporter.section("reliability scenarios")
    terminalreporter.write_line(
        "| scenario | runs | faults injected | invoices | lost | extra requests after |"
    )
    terminalreporter.write_line("|---|---|---|---|---|---|")
    for row in ROWS:
        terminalreporter.write_line(
            f"| {row['scenario']} | {row['runs']} | {row['faults']} | {row['invoices']} | "
            f"{row['lost']} | {row['extra']} |"
        )
