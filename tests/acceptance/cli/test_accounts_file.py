"""The accounts file of `sync-many` and `accounts import`, read as a careless operator or an
attacker would hand it over (issue 37): files that never end, odd digits, Excel's CSV,
control characters in what reaches a terminal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from invoicing_async._cli import accounts_file
from invoicing_async._cli.accounts_file import AccountsFileError, load_accounts

HEADER = "name,base_url,username,password_env,hourly_limit\n"
ROW = "acme,https://acme.example.com,api-user,INVOICING_SECRET_ACME,300\n"


def problems(path: Path) -> tuple[str, ...]:
    with pytest.raises(AccountsFileError) as info:
        load_accounts(path)
    assert all("\n" not in line for line in info.value.problems)  # one line each
    return info.value.problems


def test_files_that_never_end_or_block_are_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device is refused before any byte is read (/dev/zero never ends); a regular file
    past the bound is read no further than the bound; a FIFO with no writer is refused
    without waiting for one."""
    for device in ("/dev/null", "/dev/zero"):
        assert problems(Path(device)) == (f"accounts file {device} is not a regular file",)
    monkeypatch.setattr(accounts_file, "MAX_FILE_BYTES", 1000)
    big = tmp_path / "big.toml"
    with big.open("wb") as out:
        out.truncate(10**12)  # sparse: a terabyte of nothing, never read whole
    assert problems(big) == (f"accounts file {big} is larger than 1000 bytes",)
    fifo = tmp_path / "accounts.toml"
    os.mkfifo(fifo, 0o600)
    assert problems(fifo) == (f"accounts file {fifo} is not a regular file",)


@pytest.mark.parametrize("value", ["²", "٣", "0", "-1", "9" * 5000, "2147483648", "3.0", "True"])
def test_a_number_that_is_not_plain_ascii_digits_is_one_line(tmp_path: Path, value: str) -> None:
    """A "²" passes str.isdigit() and then fails int(); 5,000 digits fail int() too."""
    file = tmp_path / "accounts.csv"
    file.write_text(HEADER + ROW.replace(",300\n", f",{value}\n"), encoding="utf-8")
    assert problems(file) == (
        f"{file}:2: account 'acme': hourly_limit must be a positive whole number "
        "(at most 2147483647)",
    )
    toml = tmp_path / "accounts.toml"
    toml.write_text(
        '[[accounts]]\nname = "acme"\nbase_url = "https://acme.example.com"\n'
        f'username = "u"\npassword_env = "X"\nevery_seconds = "{value}"\n',
        encoding="utf-8",
    )
    assert "every_seconds must be a positive whole number" in problems(toml)[0]


def test_whole_numbers_in_range_are_read(tmp_path: Path) -> None:
    file = tmp_path / "accounts.csv"
    file.write_text(HEADER + ROW.replace(",300\n", ",2147483647\n"), encoding="utf-8")
    assert [a.hourly_limit for a in load_accounts(file)] == [2147483647]


@pytest.mark.parametrize("newline", ["\r\n", "\n"])
def test_a_csv_saved_by_excel_with_a_byte_order_mark_is_read(tmp_path: Path, newline: str) -> None:
    """Excel's "CSV UTF-8" starts with a BOM, which made the first column's name
    "\\ufeffname": every row had no name."""
    file = tmp_path / "accounts.csv"
    file.write_bytes((HEADER + ROW).replace("\n", newline).encode("utf-8-sig"))
    (acme,) = load_accounts(file)
    assert (acme.name, acme.base_url, acme.hourly_limit) == (
        "acme",
        "https://acme.example.com",
        300,
    )
    toml = tmp_path / "accounts.toml"
    toml.write_bytes(
        b'\xef\xbb\xbf[[accounts]]\nname = "acme"\nbase_url = "https://acme.example.com"\n'
        b'username = "u"\npassword_env = "X"\n'
    )
    assert [a.name for a in load_accounts(toml)] == ["acme"]


ESCAPES = "\x1b]0;owned\x07\x1b[2J"  # set the window title, clear the screen


@pytest.mark.parametrize("username", [f"api{ESCAPES}", "api\nuser", "api\tuser", "api\u202euser"])
def test_control_characters_in_a_username_are_refused_without_being_shown(
    tmp_path: Path, username: str
) -> None:
    toml = tmp_path / "accounts.toml"
    toml.write_text(
        '[[accounts]]\nname = "acme"\nbase_url = "https://acme.example.com"\n'
        f'username = {json.dumps(username)}\npassword_env = "X"\n',
        encoding="utf-8",
    )
    csv = tmp_path / "accounts.csv"
    quoted = '"' + username.replace('"', '""') + '"'  # as a spreadsheet writes a cell
    csv.write_text(HEADER + ROW.replace("api-user", quoted), encoding="utf-8")
    for file in (toml, csv):
        (problem,) = problems(file)
        assert problem.endswith(
            "account 'acme': username holds a control character (a newline, a tab, a terminal "
            "escape); write it without"
        )
        assert problem.isprintable()
