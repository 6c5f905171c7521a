"""The command line, run as users run it: in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._cli import main
from invoicing_async.testing import FakeInvoicingService

ROOT = Path(__file__).parents[3]


async def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "invoicing_async",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_demo_runs_and_reports_minimal_costs(tmp_path: Path) -> None:
    code, out, _err = await run(
        "demo", "--invoices", "450", "--no-progress", "--db", str(tmp_path / "d.db")
    )
    assert code == 0, out
    assert "requests   6" in out  # 1 list + 5 batches for 450 invoices
    assert "Requests: first sync 6 (minimum 6), second 2 (minimum 2), third 1 (minimum 1)" in out
    # The hour the clock moves between the syncs is said, before the syncs it explains.
    moved = out.index("The fake service's clock moves on an hour before the next syncs")
    assert out.index("first sync") < moved < out.index("second sync")
    assert "346 of 350 left in the hour since its clock moved" in out  # 2 + 1 + get
    assert "the same as the service's copy: True (1 request)" in out
    with contextlib.closing(sqlite3.connect(tmp_path / "d.db")) as db:
        rows = db.execute("SELECT count(*) FROM invoices WHERE deleted_at IS NULL").fetchone()
    assert rows == (446,)  # 450 - 5 deleted + 1 created


@pytest.mark.slow
async def test_sync_command_with_password_from_the_environment(tmp_path: Path) -> None:
    async with FakeInvoicingService(invoices=120, seed=3) as service:
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        args = (
            "sync",
            "--base-url",
            service.base_url,
            "--username",
            service.username,
            "--db",
            str(tmp_path / "s.db"),
            "--ca-file",
            str(ca),
            "--json",
        )
        code, out, err = await run(*args, env={"INVOICING_PASSWORD": service.password})
        assert code == 0, err
        report = json.loads(out)
        assert (report["created"], report["requests"], report["complete"]) == (120, 3, True)
        assert service.password not in out + err

        code, out, err = await run(
            *args[:-1], "--dry-run", env={"INVOICING_PASSWORD": service.password}
        )
        assert code == 0, err
        assert "dry run: listed 120: would fetch 0 in 0 requests" in out

        code, out, err = await run(*args, env={"INVOICING_PASSWORD": "wrong-password"})
        assert code == 1
        assert "401" in err
        assert "wrong-password" not in out + err


async def test_sync_stopped_by_the_budget_at_the_sync_list_exits_3(tmp_path: Path) -> None:
    async with FakeInvoicingService(invoices=5, seed=3, limit=2) as service:
        async with service.client() as client:  # spend the account's hour elsewhere
            await client.current_session()
            await client.current_session()
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        code, out, err = await run(
            "sync",
            "--base-url",
            service.base_url,
            "--username",
            service.username,
            "--db",
            str(tmp_path / "s.db"),
            "--ca-file",
            str(ca),
            env={"INVOICING_PASSWORD": service.password},
        )
        assert code == 3, (out, err)
        assert "stopped for the hourly budget" in err
        assert "Traceback" not in err


@pytest.mark.slow
async def test_syncs_sharing_a_budget_stop_before_the_server_refuses(tmp_path: Path) -> None:
    """Two runs, one `--budget` file: the second knows the hour is spent without asking."""
    async with FakeInvoicingService(invoices=1000, seed=3, limit=8) as service:
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        budget = f"sqlite:///{tmp_path / 'budget.db'}"
        common = ["--base-url", service.base_url, "--username", service.username]
        common += ["--ca-file", str(ca), "--budget", budget, "--no-progress"]
        env = {"INVOICING_PASSWORD": service.password}
        code, out, err = await run("sync", "--db", str(tmp_path / "a.db"), *common, env=env)
        assert code == 3, (out, err)
        assert service.account.window.used == 8  # the list and 7 batches: all there was
        code, out, err = await run("sync", "--db", str(tmp_path / "b.db"), *common, env=env)
        assert code == 3, (out, err)
        assert "stopped for the hourly budget" in err
        assert service.account.window.used == 8  # not one more request
        assert service.account.counters["403"] == 0


async def test_an_unreachable_shared_budget_is_one_line_and_exit_1(tmp_path: Path) -> None:
    code, _out, err = await run(
        "sync",
        "--base-url",
        "https://127.0.0.1:9",
        "--username",
        "u",
        "--db",
        str(tmp_path / "s.db"),
        "--budget",
        "redis://:secret-pw@127.0.0.1:9/0",
        env={"INVOICING_PASSWORD": "pw"},
    )
    assert code == 1
    assert len(err.strip().splitlines()) == 1
    assert "the request was not sent" in err
    assert "secret-pw" not in err


async def test_sync_into_a_corrupt_database_prints_one_line(tmp_path: Path) -> None:
    db = tmp_path / "corrupt.db"
    db.write_bytes(b"not a database" * 500)
    code, _out, err = await run(
        "sync",
        "--base-url",
        "https://127.0.0.1:9",
        "--username",
        "u",
        "--db",
        str(db),
        env={"INVOICING_PASSWORD": "pw"},
    )
    assert code == 1
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "corrupt or not a SQLite database" in err
    assert db.read_bytes() == b"not a database" * 500


@pytest.mark.slow
async def test_sync_command_takes_oauth1_credentials_from_the_environment(tmp_path: Path) -> None:
    async with FakeInvoicingService(invoices=3, seed=3) as service:
        ca = tmp_path / "ca.pem"
        service.write_ca(ca)
        env = {
            "INVOICING_USERNAME": "",
            "INVOICING_PASSWORD": "",
            "INVOICING_CONSUMER_KEY": "ck-1",
            "INVOICING_CONSUMER_SECRET": "cs-secret-1",
            "INVOICING_TOKEN": "tk-1",
            "INVOICING_TOKEN_SECRET": "ts-secret-1",
        }
        code, out, err = await run(
            "sync",
            "--base-url",
            service.base_url,
            "--db",
            str(tmp_path / "o.db"),
            "--ca-file",
            str(ca),
            env=env,
        )
        # The fake service accepts Basic only: the OAuth-signed request is refused.
        assert code == 1, err
        assert "401" in err
        assert "cs-secret-1" not in out + err
        assert "ts-secret-1" not in out + err
        del env["INVOICING_TOKEN_SECRET"]
        code, out, err = await run(
            "sync", "--base-url", service.base_url, "--db", str(tmp_path / "o.db"), env=env
        )
        assert code == 2
        assert "OAuth 1 needs INVOICING_TOKEN_SECRET" in err


async def test_sync_command_needs_credentials(tmp_path: Path) -> None:
    env = {"INVOICING_PASSWORD": "", "INVOICING_USERNAME": ""}
    os.environ.pop("INVOICING_PASSWORD", None)
    code, _out, err = await run(
        "sync", "--base-url", "https://acme.example.com", "--db", str(tmp_path / "x.db"), env=env
    )
    assert code == 2
    assert "username" in err


@asynccontextmanager
async def fake_server(tmp_path: Path, *args: str) -> AsyncIterator[str]:
    """`invoicing-async fake-server` in a subprocess; yields what it printed to connect."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "invoicing_async",
        "fake-server",
        "--port",
        "0",
        "--password",
        "pw-for-test",
        "--ca-out",
        str(tmp_path / "ca.pem"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        while not lines or "Ctrl-C" not in lines[-1]:
            lines.append((await asyncio.wait_for(process.stdout.readline(), 30)).decode())
        yield "".join(lines)
    finally:
        process.terminate()
        await process.wait()


async def test_fake_server_prints_how_to_connect(tmp_path: Path) -> None:
    async with fake_server(tmp_path, "--invoices", "10") as text:
        assert "base URL:  https://127.0.0.1:" in text
        assert "password:  pw-for-test" in text
    assert (tmp_path / "ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")


async def test_fake_server_oauth1_prints_credentials_that_sign(tmp_path: Path) -> None:
    async with fake_server(tmp_path, "--invoices", "3", "--oauth1") as text:
        lines = {
            line.split(": ")[0].strip(): line.split(": ", 1)[1].strip().split(" / ")
            for line in text.splitlines()
            if ": " in line
        }
        consumer_key, consumer_secret = lines["OAuth 1.0a consumer key / secret"]
        token, token_secret = lines["OAuth 1.0a token / secret"]
        auth = ia.OAuth1Auth(consumer_key, consumer_secret, token, token_secret)
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        url = lines["base URL"][0]
        async with ia.InvoicingClient(url, auth=auth, ssl=context) as client:
            assert len(await client.invoices.list()) == 3
        wrong = ia.OAuth1Auth(consumer_key, consumer_secret, token, "not-the-secret")
        async with ia.InvoicingClient(url, auth=wrong, ssl=context) as client:
            with pytest.raises(ia.AuthenticationError):
                await client.current_session()


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert "invoicing-async 0.1.0" in capsys.readouterr().out


async def test_fake_server_accounts_are_isolated(tmp_path: Path) -> None:
    async with fake_server(tmp_path, "--invoices", "20", "--accounts", "3") as text:
        url = next(line.split()[-1] for line in text.splitlines() if "base URL:" in line)
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))

        def client(user: str) -> ia.InvoicingClient:
            return ia.InvoicingClient(
                url,
                auth=ia.BasicAuth(user, "pw-for-test"),
                ssl=context,
                budget=ia.RateBudget(limit=1000),
            )

        async with client("account-2") as two, client("account-3") as three:
            target = next(i for i in await two.invoices.list() if i.state in ("open", "late"))
            before = await three.invoices.get(target)
            paid = await two.invoices.register_payment(
                target,
                m.InvoicePayment(
                    payment_date=before.invoice_date,
                    payment_method="cash",
                    price=target.total_unpaid,
                    send_email=False,
                ),
            )
            await two.invoices.update(target, po_number="only in account-2")
            after = await three.invoices.get(target)
        assert paid.state == "paid"
        assert after == before  # account-3's invoice of the same id is untouched
        assert after.po_number != "only in account-2"


async def test_fake_server_port_per_account_prints_each_accounts_url(tmp_path: Path) -> None:
    args = ("--invoices", "3", "--accounts", "3", "--port-per-account", "--no-tls")
    async with fake_server(tmp_path, *args) as text:
        urls = dict(
            line.strip().split(": ", 1)
            for line in text.splitlines()
            if line.strip().startswith(("api-user:", "account-"))
        )
        assert sorted(urls) == ["account-2", "account-3", "api-user"]
        assert len(set(urls.values())) == 3
        async with ia.InvoicingClient(
            urls["account-3"], auth=ia.BasicAuth("account-3", "pw-for-test")
        ) as client:
            assert len(await client.invoices.list()) == 3
