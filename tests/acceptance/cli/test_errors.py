"""The errors operators meet: one line on stderr and a documented exit code, never a trace."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from invoicing_async._cli import _parser
from invoicing_async.testing import FakeInvoicingService

pytestmark = pytest.mark.slow  # the command line in processes of its own

ROOT = Path(__file__).parents[3]
ENV = {"INVOICING_PASSWORD": "pw-not-used"}


async def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "invoicing_async", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=ROOT, env={**os.environ, **ENV, **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# argparse has no public way to walk a parser's tree.
def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return parser._actions  # noqa: SLF001


def subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    kind = argparse._SubParsersAction  # noqa: SLF001
    return [p for a in actions(parser) if isinstance(a, kind) for p in a.choices.values()]


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for sub in subcommands(parser):
        yield from parsers(sub)


def test_no_parser_takes_abbreviations_and_every_command_takes_the_logging_options() -> None:
    every = list(parsers(_parser()))
    assert len(every) > 10
    assert all(not p.allow_abbrev for p in every)
    for leaf in (p for p in every if not subcommands(p)):
        options = {o for a in actions(leaf) for o in a.option_strings}
        assert {"-v", "--verbose", "--log-level", "--log-format"} <= options, leaf.prog


async def test_a_password_typed_as_an_option_is_refused_and_not_shown(tmp_path: Path) -> None:
    base = ("sync", "--base-url", "https://127.0.0.1:9", "--username", "u")
    code, _, err = await run(*base, "--db", str(tmp_path / "s.db"), "--password", "hunter2")
    assert code == 2
    line = one_line(err)
    assert "unrecognized arguments: --password (values not shown)" in line
    assert "hunter2" not in err
    code, _, err = await run("sync", "--base-ur", "https://x", "--db", str(tmp_path / "s.db"))
    assert code == 2
    assert "--base-ur" in one_line(err)


async def test_file_tls_and_permission_failures_are_one_line(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")
    base = ("sync", "--base-url", "https://127.0.0.1:9", "--username", "u")
    cases = [
        (("--db", str(tmp_path / "a.db"), "--ca-file", "/nope.pem"), "CA file /nope.pem: no such"),
        (
            ("--db", str(tmp_path / "b.db"), "--ca-file", str(not_pem)),
            f"CA file {not_pem}: not a PEM",
        ),
        # Writable by nobody, root included: the lock file beside the store cannot be made.
        (("--db", "/sys/invoicing-async-test.db"), "/sys/invoicing-async-test.db.lock: Permission"),
    ]
    for extra, expected in cases:
        code, _, err = await run(*base, *extra)
        assert code == 1, err
        assert expected in one_line(err)


async def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """`… | head`: the reader left; no BrokenPipeError trace, exit 141 as after SIGPIPE."""
    async with FakeInvoicingService(invoices=50, seed=1, tls=False) as service:
        read, write = os.pipe()
        os.close(read)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "invoicing_async", "sync", "--base-url", service.base_url,
                "--username", service.username, "--db", str(tmp_path / "s.db"), "--json",
                stdout=write, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
                env={**os.environ, "INVOICING_PASSWORD": service.password},
            )  # fmt: skip
        finally:
            os.close(write)
        _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 141, err.decode()
    assert err == b""


async def test_a_dry_run_reports_the_plan_alike_in_text_and_json_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with FakeInvoicingService(invoices=250, seed=1, tls=False) as service:
        args = ["sync", "--base-url", service.base_url, "--username", service.username]
        args += ["--db", str(tmp_path / "new.db"), "--dry-run"]
        env = {"INVOICING_PASSWORD": service.password}
        code, out, err = await run(*args, env=env)
        assert code == 0, err
        assert out.strip() == (
            "dry run: listed 250: would fetch 250 in 3 requests (349 available now), "
            "delete 0, 0 unchanged; 1 requests spent"
        )
        code, out, err = await run(*args, "--json", env=env)
        assert code == 0, err
        report = json.loads(out)
        assert (report["listed"], report["planned"], report["needed_requests"]) == (250, 250, 3)
        assert service.account.counters["sync_list"] == 2
        assert service.account.counters["sync_fetch"] == 0
    assert os.listdir(tmp_path) == []  # no database, no lock file


async def test_the_demo_refuses_a_negative_count_and_keeps_its_lines_straight(
    tmp_path: Path,
) -> None:
    code, out, err = await run("demo", "--invoices", "-5")
    assert code == 2
    assert "--invoices: must be at least 1, not -5" in one_line(err)
    assert out == ""
    # Redirected output: no progress frames; no temporary path that is gone at exit.
    code, out, err = await run("demo", "--invoices", "150")
    assert code == 0, err
    assert "\r" not in out + err
    assert "invoicing-async-demo-" not in out
    assert sum("left" in line for line in out.splitlines()) == 1  # one word on the budget
    db = tmp_path / "kept.db"
    code, out, err = await run("demo", "--invoices", "150", "--no-progress", "--db", str(db))
    assert code == 0, err
    assert f"live invoices in {db}" in out
    assert db.exists()
