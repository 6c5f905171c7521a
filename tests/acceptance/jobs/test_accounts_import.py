"""`accounts import`: many accounts from a TOML or CSV file, all rows checked before any
is written, upserted in one transaction (issue #26, item 5)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trustme

from invoicing_async._cli import main
from tests.acceptance.jobs.test_jobs import cli, query

HEADER = "name,base_url,username,password_env,format,hourly_limit,every_seconds\n"


def accounts(url: str) -> list[tuple[str, str, str, int, int]]:
    return [
        (r[0], r[1], r[2], r[3], r[4])
        for r in query(
            url,
            "SELECT name, base_url, secret_ref, hourly_limit, every_seconds"
            " FROM invoicing_accounts ORDER BY name",
        )
    ]


def test_a_toml_file_as_sync_many_reads_it_is_imported_and_reimported_idempotently(
    migrated: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca))
    file = tmp_path / "accounts.toml"
    file.write_text(
        '[defaults]\nformat = "json"\nhourly_limit = 300\n'
        '[[accounts]]\nname = "acme"\nbase_url = "https://acme.example.com"\n'
        'username = "u"\npassword_env = "INVOICING_SECRET_ACME"\nca_file = "ca.pem"\n'
        '[[accounts]]\nname = "beta"\nbase_url = "http://127.0.0.1:8080"\n'
        'auth = "oauth1"\nconsumer_key = "ck"\nconsumer_secret_env = "INVOICING_SECRET_CS"\n'
        'token = "tk"\ntoken_secret_file = "/run/secrets/beta"\nevery_seconds = 3600\n'
    )
    assert cli("accounts", "import", str(file), url=migrated) == 0
    assert "2 added, 0 updated, 0 unchanged" in capsys.readouterr().out
    assert accounts(migrated) == [
        ("acme", "https://acme.example.com", "env:INVOICING_SECRET_ACME", 300, 86400),
        ("beta", "http://127.0.0.1:8080", "env:INVOICING_SECRET_CS", 300, 3600),
    ]
    (ca_file, auth, token_ref) = query(
        migrated, "SELECT ca_file, auth, token_secret_ref FROM invoicing_accounts ORDER BY name"
    )[0]
    assert (ca_file, auth, token_ref) == (str(ca), "basic", None)
    assert query(migrated, "SELECT token_secret_ref FROM invoicing_accounts WHERE name = 'beta'")[
        0
    ] == ("file:/run/secrets/beta",)
    due = query(migrated, "SELECT name, due_at FROM invoicing_accounts ORDER BY name")
    # Again, with one account changed: nothing added, its schedule kept.
    file.write_text(file.read_text().replace("hourly_limit = 300", "hourly_limit = 200"))
    assert cli("accounts", "import", str(file), url=migrated) == 0
    assert "0 added, 2 updated, 0 unchanged" in capsys.readouterr().out
    assert [a[3] for a in accounts(migrated)] == [200, 200]
    assert query(migrated, "SELECT name, due_at FROM invoicing_accounts ORDER BY name") == due


def test_bad_rows_are_all_listed_with_their_lines_and_nothing_is_written(
    migrated: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "accounts.csv"
    file.write_text(
        HEADER
        + "good,https://good.example.com,u,INVOICING_SECRET_A,json,350,86400\n"
        + "plain,http://plain.example.com,u,INVOICING_SECRET_A,xml,350,86400\n"  # line 3
        + "nouser,https://n.example.com,,INVOICING_SECRET_A,xml,350,86400\n"  # line 4
        + "good,https://again.example.com,u,INVOICING_SECRET_A,xml,350,86400\n"  # line 5
        + "fmt,https://f.example.com,u,INVOICING_SECRET_A,yaml,350,86400\n"  # line 6
        + "limit,https://l.example.com,u,INVOICING_SECRET_A,xml,-1,86400\n"  # line 7
    )
    assert cli("accounts", "import", str(file), url=migrated) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: {file}: 5 bad rows; nothing imported"
    problems = "\n".join(err[1:])
    for line, text in [
        (3, "refusing plain http to plain.example.com"),
        (4, "username is required"),
        (5, "account names must be unique: 'good' is also on line 2"),
        (6, "format must be"),
        (7, "hourly_limit must be a positive whole number"),
    ]:
        assert f"{file}:{line}: " in problems
        assert text in problems
    assert accounts(migrated) == []


def test_add_and_import_refuse_plain_http_and_an_unusable_ca_file_at_once(
    migrated: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("--username", "u", "--secret", "env:INVOICING_SECRET_X")
    assert (
        cli("accounts", "add", "a", "--base-url", "http://a.example.com", *base, url=migrated) == 2
    )
    assert "refusing plain http" in capsys.readouterr().err
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate")
    for ca, message in [(tmp_path / "nope.pem", "no such file"), (not_pem, "not a PEM")]:
        add = ("accounts", "add", "a", "--base-url", "https://a.example.com", *base)
        assert cli(*add, "--ca-file", str(ca), url=migrated) == 2
        assert message in capsys.readouterr().err
    # Loopback may be plain http, as the client allows.
    assert cli("accounts", "add", "a", "--base-url", "http://localhost:9", *base, url=migrated) == 0
    file = tmp_path / "a.toml"
    file.write_text(
        '[[accounts]]\nname = "b"\nbase_url = "https://b.example.com"\nusername = "u"\n'
        'password_env = "INVOICING_SECRET_X"\nca_file = "nope.pem"\n'
    )
    assert cli("accounts", "import", str(file), url=migrated) == 1
    assert f"{file}:1: account 'b': CA file {tmp_path / 'nope.pem'}: no such file" in (
        capsys.readouterr().err
    )


def test_ten_thousand_accounts_are_imported_in_one_transaction(
    migrated: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "many.csv"
    file.write_text(
        HEADER
        + "".join(
            f"acct-{n:05d},https://h{n % 50}.example.com,u{n},INVOICING_SECRET_{n},json,350,86400\n"
            for n in range(10_000)
        )
    )
    started = time.perf_counter()
    assert main(["accounts", "import", str(file), "--database-url", migrated]) == 0
    seconds = time.perf_counter() - started
    assert "10000 added" in capsys.readouterr().out
    with capsys.disabled():
        print(f"\nimported 10,000 accounts in {seconds:.2f}s")
    # One transaction wrote every row (one round of writes, not one per row): its speed is
    # benchmarks/bench_jobs.py's (the import's time is reported there), not a bound here.
    assert query(migrated, "SELECT count(DISTINCT xmin::text) FROM invoicing_accounts") == [(1,)]
    assert query(migrated, "SELECT count(*), count(DISTINCT host) FROM invoicing_accounts") == [
        (10_000, 50)
    ]
    # The same file again: nothing added, nothing written.
    assert main(["accounts", "import", str(file), "--database-url", migrated]) == 0
    assert "0 added, 0 updated, 10000 unchanged" in capsys.readouterr().out


def test_a_file_that_never_ends_is_one_line_and_nothing_is_written(
    migrated: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "accounts.csv"
    os.mkfifo(fifo, 0o600)
    for path in (fifo, Path("/dev/zero")):
        assert cli("accounts", "import", str(path), url=migrated) == 1
        err = capsys.readouterr().err
        assert err == f"error: accounts file {path} is not a regular file\n"
    assert accounts(migrated) == []


def test_control_characters_are_refused_on_add_and_escaped_when_listed(
    migrated: str, capsys: pytest.CaptureFixture[str]
) -> None:
    escapes = "api\x1b]0;owned\x07\x1b[2J\nforged\tline"
    add = ("accounts", "add", "acme", "--base-url", "https://acme.example.com")
    ref = ("--secret", "env:INVOICING_SECRET_X")
    assert cli(*add, "--username", escapes, *ref, url=migrated) == 2
    err = capsys.readouterr().err
    assert err == "error: account 'acme': the username and token must not hold control characters\n"
    # A row written before the check (or by hand) is shown escaped, on one line.
    assert cli(*add, "--username", "api", *ref, url=migrated) == 0
    query(migrated, "UPDATE invoicing_accounts SET username = %s RETURNING 1", (escapes,))
    capsys.readouterr()
    assert cli("accounts", "list", url=migrated) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split("\t")[:5] == [
        "acme",
        "https://acme.example.com",
        "xml",
        "basic",
        "api\\x1b]0;owned\\x07\\x1b[2J\\nforged\\tline",
    ]
