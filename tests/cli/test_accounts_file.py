"""The accounts file of `sync-many` and `accounts import`, read as a careless operator or an
attacker would hand it over (issue 37): files that never end, odd digits, Excel's CSV,
control characters in what reaches a terminal."""

from __future__ import annotations

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
