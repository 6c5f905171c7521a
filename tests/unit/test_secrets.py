"""Secret references: parsed in one place, confined by the reader's policy, read off the loop."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path, PurePath

import pytest

from invoicing_async import _secrets
from invoicing_async._secrets import (
    SecretError,
    SecretPolicy,
    SecretRef,
    parse_secret_ref,
    read_secret,
    redact,
)


def secret_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_references_parse_and_a_secret_given_instead_is_not_echoed() -> None:
    assert parse_secret_ref("env:INVOICING_SECRET_A") == SecretRef("env", "INVOICING_SECRET_A")
    assert str(parse_secret_ref("file:/run/secrets/a")) == "file:/run/secrets/a"
    for bad in ("hunter2", "env:1X", "env:", "file:relative", "vault:x"):
        with pytest.raises(SecretError) as info:
            parse_secret_ref(bad, "password")
        assert bad not in str(info.value).replace("env:VARIABLE", "")
        assert "password must be a reference" in str(info.value)


async def test_variables_outside_the_prefix_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVOICING_DATABASE_URL", "postgresql://u:db-password@h/db")
    monkeypatch.setenv("INVOICING_SECRET_ACME", "acme-pw")
    policy = SecretPolicy()
    with pytest.raises(SecretError, match=r"reads only variables named INVOICING_SECRET_\*"):
        await read_secret(SecretRef("env", "INVOICING_DATABASE_URL"), policy)
    assert await read_secret(SecretRef("env", "INVOICING_SECRET_ACME"), policy) == "acme-pw"
    with pytest.raises(SecretError, match=r"\$INVOICING_SECRET_NONE \(secret\) is not set"):
        await read_secret(SecretRef("env", "INVOICING_SECRET_NONE"), policy)
    assert await read_secret(
        SecretRef("env", "INVOICING_DATABASE_URL"), SecretPolicy.unconfined()
    ) == ("postgresql://u:db-password@h/db")


async def test_files_only_under_the_secrets_directory_symlinks_resolved(tmp_path: Path) -> None:
    inside, outside = tmp_path / "secrets", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    good = secret_file(inside / "acme", "acme-pw\n")
    other = secret_file(outside / "other", "not-yours")
    (inside / "link").symlink_to(other)
    policy = SecretPolicy(secrets_dir=inside)
    assert await read_secret(SecretRef("file", str(good)), policy) == "acme-pw"
    for path in (other, inside / "link", inside / ".." / "elsewhere" / "other"):
        with pytest.raises(SecretError, match="not under the secrets directory"):
            await read_secret(SecretRef("file", str(path)), policy)
    with pytest.raises(SecretError, match="no secrets directory"):
        await read_secret(SecretRef("file", str(good)), SecretPolicy())


@pytest.mark.parametrize(
    ("mode", "owner", "why"),
    [
        (0o1777, None, "others can write it"),
        (0o770, None, "others can write it"),
        (0o702, None, "others can write it"),
        (0o700, 65534, "owned by uid 65534"),
    ],
)
async def test_a_secrets_directory_others_can_write_is_refused(
    tmp_path: Path, mode: int, owner: int | None, why: str
) -> None:
    """Whoever can write the directory can put any file there (or a link to one)."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    good = secret_file(secrets / "acme", "acme-pw")
    policy = SecretPolicy(secrets_dir=secrets)
    secrets.chmod(mode)
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(secrets, owner, -1)
    with pytest.raises(SecretError, match=f"secrets directory {secrets} refused: {why}"):
        SecretPolicy(secrets_dir=secrets)  # the worker does not start
    with pytest.raises(SecretError, match=why):  # nor reads, if it changed after the start
        await read_secret(SecretRef("file", str(good)), policy)


async def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of round 4: the path is resolved and checked, then a local user who can
    write a folder on it swaps the folder for a link out of the directory. What is
    opened is what was checked, one component at a time, no link followed."""
    secrets, outside = tmp_path / "secrets", tmp_path / "outside"
    (secrets / "team").mkdir(parents=True)
    (outside / "team").mkdir(parents=True)
    ref = SecretRef("file", str(secret_file(secrets / "team" / "acme", "acme-pw")))
    secret_file(outside / "team" / "acme", "owner-only secret of someone else")
    policy = SecretPolicy(secrets_dir=secrets)
    resolve = os.path.realpath
    flipped: list[str] = []

    def realpath_then_swap(path: object, *args: object, **kwargs: object) -> str:
        real = resolve(path, *args, **kwargs)  # type: ignore[call-overload]
        if path == ref.name and not flipped:
            (secrets / "team").rename(secrets / "team.old")
            (secrets / "team").symlink_to(outside / "team")
            flipped.append(real)
        return str(real)

    monkeypatch.setattr(os.path, "realpath", realpath_then_swap)
    with pytest.raises(SecretError, match="its path changed after it was checked"):
        await read_secret(ref, policy)
    assert flipped


async def test_only_owner_only_regular_small_text_files(tmp_path: Path) -> None:
    policy = SecretPolicy(secrets_dir=tmp_path)
    cases = {
        secret_file(tmp_path / "loose", "pw", 0o644): "readable by others",
        tmp_path / "missing": "cannot read",
        secret_file(tmp_path / "big", "x" * (64 * 1024 + 1)): "larger than",
        tmp_path: "not a regular file",
    }
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    (tmp_path / "binary").chmod(0o600)
    cases[tmp_path / "binary"] = "not UTF-8"
    for path, message in cases.items():
        with pytest.raises(SecretError, match=message):
            await read_secret(SecretRef("file", str(path)), policy)


async def heartbeat(beats: list[None], every: float) -> None:
    """Counts the loop's turns until cancelled, as a worker's heartbeat would beat."""
    while True:
        beats.append(None)
        await asyncio.sleep(every)


async def test_a_fifo_is_refused_at_once_and_the_loop_keeps_beating(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    beats: list[None] = []
    beating = asyncio.create_task(heartbeat(beats, 0))
    try:
        with pytest.raises(SecretError, match="not a regular file"):
            # No writer ever opens the FIFO: a blocking open would wait forever.
            await read_secret(SecretRef("file", str(fifo)), SecretPolicy(secrets_dir=tmp_path))
    finally:
        beating.cancel()
    assert beats


async def test_a_hung_read_times_out_without_holding_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that never answers (a dead NFS server): the read is abandoned."""
    release, hanging = threading.Event(), threading.Event()
    beats_while_hung: list[None] = []

    def hung(root: str, inside: PurePath, what: str) -> str:
        hanging.set()
        release.wait(30)
        return "late"

    async def beat() -> None:
        """The loop's turns while the read hangs in its thread (the event, not a count)."""
        while True:
            if hanging.is_set():
                beats_while_hung.append(None)
            await asyncio.sleep(0.01)

    monkeypatch.setattr(_secrets, "_read_file", hung)
    beating = asyncio.create_task(beat())
    policy = SecretPolicy(secrets_dir=tmp_path, timeout=0.2)
    try:
        with pytest.raises(SecretError, match=r"not read within 0.2s"):
            await read_secret(SecretRef("file", str(tmp_path / "nfs")), policy)
    finally:
        release.set()
        beating.cancel()
    assert beats_while_hung  # the loop ran on while the read hung


async def test_secrets_read_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVOICING_SECRET_REDACT_ME", "s3cr3t-value")
    await read_secret(SecretRef("env", "INVOICING_SECRET_REDACT_ME"), SecretPolicy())
    assert redact("auth failed for s3cr3t-value at host") == "auth failed for *** at host"
