"""`sync-many`: an accounts file, concurrent accounts, per-account locks, one summary."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

import invoicing_async as ia
from invoicing_async._cli.accounts_file import AccountsFileError, load_accounts
from invoicing_async._cli.sync_many import StoreLock
from invoicing_async._secrets import SecretError, SecretPolicy
from invoicing_async.testing import FakeInvoicingService

ROOT = Path(__file__).parents[3]


async def run(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "invoicing_async",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[list[FakeInvoicingService]]:
    async with AsyncExitStack() as stack:
        made = [
            await stack.enter_async_context(FakeInvoicingService(invoices=n, seed=n))
            for n in (150, 40, 220)
        ]
        for i, service in enumerate(made):
            service.write_ca(tmp_path / f"ca-{i}.pem")
        yield made


def write_accounts(
    tmp_path: Path, services: list[FakeInvoicingService]
) -> tuple[Path, dict[str, str]]:
    blocks = ['[defaults]\nformat = "json"\ndb_dir = "stores"\n']
    env = {}
    for i, service in enumerate(services):
        blocks.append(
            f'[[accounts]]\nname = "acct-{i}"\nbase_url = "{service.base_url}"\n'
            f'username = "{service.username}"\npassword_env = "ACCT_{i}_PASSWORD"\n'
            f'ca_file = "ca-{i}.pem"\n'
        )
        env[f"ACCT_{i}_PASSWORD"] = service.password
    path = tmp_path / "accounts.toml"
    path.write_text("\n".join(blocks))
    return path, env


@pytest.mark.slow
async def test_syncs_every_account_at_minimal_cost_then_only_lists(
    tmp_path: Path, services: list[FakeInvoicingService]
) -> None:
    path, env = write_accounts(tmp_path, services)
    code, out, err = await run("sync-many", str(path), "--json", env=env)
    assert code == 0, err
    result = json.loads(out)
    assert result["counts"]["complete"] == 3
    created = [a["report"]["created"] for a in result["accounts"]]
    assert created == [150, 40, 220]
    assert result["requests"] == (1 + 2) + (1 + 1) + (1 + 3)  # 1 list + ceil(N/100) each
    assert sorted(p.name for p in (tmp_path / "stores").glob("*.sqlite3")) == [
        "acct-0.sqlite3",
        "acct-1.sqlite3",
        "acct-2.sqlite3",
    ]
    code, out, err = await run("sync-many", str(path), "--json", env=env)
    assert code == 0, err
    assert json.loads(out)["requests"] == 3  # nothing changed: one sync list per account
    for service in services:
        assert service.password not in out + err


async def test_an_account_held_by_another_run_is_left_alone(
    tmp_path: Path, services: list[FakeInvoicingService]
) -> None:
    path, env = write_accounts(tmp_path, services)
    (tmp_path / "stores").mkdir()
    async with StoreLock(tmp_path / "stores" / "acct-1.sqlite3").held() as taken:
        assert taken
        code, out, err = await run("sync-many", str(path), "--json", env=env)
    assert code == 3, err  # not complete: run again later
    statuses = {a["name"]: a["status"] for a in json.loads(out)["accounts"]}
    assert statuses == {"acct-0": "complete", "acct-1": "locked", "acct-2": "complete"}
    assert services[1].account.counters["sync_list"] == 0
    assert services[0].account.counters["sync_list"] == 1


async def test_one_failing_account_does_not_stop_the_others(
    tmp_path: Path, services: list[FakeInvoicingService]
) -> None:
    path, env = write_accounts(tmp_path, services)
    env["ACCT_2_PASSWORD"] = "wrong"
    code, out, err = await run("sync-many", str(path), env=env)
    assert code == 1
    assert "acct-2: error:" in out
    assert "401" in out
    assert "acct-0: complete" in out
    assert "3 accounts: 2 complete, 1 error" in out
    assert "Traceback" not in err


async def test_two_overlapping_locks_on_one_store_exclude_each_other(tmp_path: Path) -> None:
    first, second = StoreLock(tmp_path / "a.db"), StoreLock(tmp_path / "a.db")
    async with first.held() as taken:
        assert taken
        async with second.held() as also_taken:
            assert not also_taken
    async with second.held() as taken:
        assert taken


async def test_accounts_file_defaults_paths_and_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "token-secret"
    secret.write_text("ts-value\n")
    secret.chmod(0o600)
    (tmp_path / "a.toml").write_text(
        '[defaults]\nformat = "json"\ndb_dir = "dbs"\n'
        '[[accounts]]\nname = "basic"\nbase_url = "https://a.example.com"\n'
        'username = "u"\npassword_env = "A_PW"\n'
        '[[accounts]]\nname = "oauth"\nbase_url = "https://b.example.com"\nformat = "xml"\n'
        'db = "elsewhere/b.db"\nauth = "oauth1"\nconsumer_key = "ck"\n'
        'consumer_secret_env = "B_CS"\ntoken = "tk"\ntoken_secret_file = "token-secret"\n'
    )
    monkeypatch.setenv("A_PW", "pw-a")
    monkeypatch.setenv("B_CS", "cs-b")
    basic, oauth = load_accounts(tmp_path / "a.toml")
    assert (basic.format, basic.db) == ("json", tmp_path / "dbs" / "basic.sqlite3")
    assert (oauth.format, oauth.db) == ("xml", tmp_path / "elsewhere" / "b.db")
    anywhere = SecretPolicy.unconfined()
    assert await basic.credentials().resolve(anywhere) == ia.BasicAuth("u", "pw-a")
    assert await oauth.credentials().resolve(anywhere) == ia.OAuth1Auth(
        "ck", "cs-b", "tk", "ts-value"
    )
    assert "pw-a" not in repr(basic)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('name = "a"\nbase_url = "https://a"\npassword = "clear"', "password written in the file"),
        ('name = "a"\nbase_url = "https://a"\npasword_env = "X"', "unknown keys"),
        ('name = "../a"\nbase_url = "https://a"', "name must be"),
        ('name = "a"', "base_url is required"),
        ('name = "a"\nbase_url = "https://a"\nformat = "yaml"', "format must be"),
    ],
)
def test_accounts_file_mistakes_are_named(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "a.toml").write_text(f"[[accounts]]\n{body}\n")
    with pytest.raises(AccountsFileError, match=message):
        load_accounts(tmp_path / "a.toml")


async def test_duplicate_names_and_loose_secret_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "d.toml").write_text(
        '[[accounts]]\nname = "a"\nbase_url = "https://a"\n'
        '[[accounts]]\nname = "a"\nbase_url = "https://b"\n'
    )
    with pytest.raises(AccountsFileError, match="unique"):
        load_accounts(tmp_path / "d.toml")
    loose = tmp_path / "pw"
    loose.write_text("secret")
    loose.chmod(0o644)
    (tmp_path / "l.toml").write_text(
        f'[[accounts]]\nname = "a"\nbase_url = "https://a"\nusername = "u"\npassword_file = "{loose}"\n'
    )
    (config,) = load_accounts(tmp_path / "l.toml")
    with pytest.raises(SecretError, match="readable by others"):
        await config.credentials().resolve(SecretPolicy.unconfined())
