"""Every option of every command says what it does, and `benchmarks.run --help` prints
its usage without running or recording anything."""

from __future__ import annotations

import argparse
import hashlib
import importlib

import pytest

from benchmarks import run as bench_run
from benchmarks.report import LATEST
from invoicing_async._cli import _parser


def undescribed(parser: argparse.ArgumentParser, path: str) -> list[str]:
    found = []
    for action in parser._actions:  # noqa: SLF001 - argparse keeps them only there
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                found += undescribed(sub, f"{path} {name}")
        elif not action.help:
            found.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return found


def test_every_option_of_every_command_has_help() -> None:
    assert undescribed(_parser(), "invoicing-async") == []


@pytest.mark.parametrize("command", ["fake-server", "sync", "worker"])
def test_help_describes_each_option_on_its_line(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--log-level {debug,…}` once filled its line, its help on the next: it read as none."""
    with pytest.raises(SystemExit) as done:
        _parser().parse_args([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    options = ["--log-level LEVEL", "--log-format FORMAT"]
    if command == "fake-server":
        options += ["--host HOST", "--port PORT", "--invoices INVOICES", "--seed SEED"]
    for option in options:
        line = next(line for line in text.splitlines() if line.strip().startswith(option))
        assert line.strip() != option, line


def _latest_digest() -> str | None:
    return hashlib.sha256(LATEST.read_bytes()).hexdigest() if LATEST.exists() else None


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["no-such-benchmark"]])
def test_benchmarks_run_help_runs_and_writes_nothing(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _latest_digest()
    ran: list[str] = []
    monkeypatch.setattr(importlib, "import_module", ran.append)
    with pytest.raises(SystemExit) as done:
        bench_run.main(argv)
    out = capsys.readouterr()
    assert "usage: python -m benchmarks.run" in out.out + out.err
    assert done.value.code == (0 if argv[0].startswith("-") else 2)
    assert ran == []
    assert _latest_digest() == before


def test_benchmarks_run_chooses_by_name() -> None:
    assert bench_run.chosen_modules([]) == bench_run.MODULES
    assert bench_run.chosen_modules(["percall"]) == ["bench_percall"]
    assert bench_run.chosen_modules(["jobs"]) == ["bench_jobs"]
