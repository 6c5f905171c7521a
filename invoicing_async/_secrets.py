"""Secret references (``env:VAR``, ``file:/path``): parsed, confined and read in one place.
A `SecretPolicy`, set on the reading process and never stored with the accounts, confines
them (fleets guide); secrets read are remembered for `redact`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import os
import re
import stat
import threading
from pathlib import Path, PurePath
from typing import Literal

import attrs

from invoicing_async.errors import ConfigurationError

__all__ = [
    "DEFAULT_ENV_PREFIX",
    "SecretError",
    "SecretPolicy",
    "SecretRef",
    "parse_secret_ref",
    "read_regular_file",
    "read_secret",
    "redact",
]

DEFAULT_ENV_PREFIX = "INVOICING_SECRET_"
#: A secret is a password or a key: anything longer is not one.
MAX_SECRET_BYTES = 64 * 1024
#: Shorter values are not remembered for redaction: they would blank out ordinary words.
_MIN_REDACTED = 4
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_known: set[str] = set()


class SecretError(ConfigurationError):
    """A secret reference is malformed, not allowed here, or cannot be read."""


@attrs.frozen
class SecretRef:
    """Where a secret lives: an environment variable or an absolute file path."""

    kind: Literal["env", "file"]
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


def parse_secret_ref(text: str, what: str = "secret") -> SecretRef:
    """``env:VAR`` or ``file:/absolute/path``; anything else is refused without being shown
    (a secret pasted in place of a reference is neither stored nor echoed)."""
    kind, _, rest = text.partition(":")
    if kind == "env" and _ENV.fullmatch(rest):
        return SecretRef("env", rest)
    if kind == "file" and rest.startswith("/"):
        return SecretRef("file", rest)
    raise SecretError(
        f"{what} must be a reference, env:VARIABLE or file:/absolute/path (the value given "
        "is not shown: if it was the secret itself, it was not stored)"
    )


@attrs.frozen
class SecretPolicy:
    """Which references this process may read.

    `env_prefix`: variables must start with it ("" allows any). `secrets_dir`: files must
    resolve under it (None: no file at all); a directory others can write is refused.
    `timeout`: seconds a file read may take."""

    env_prefix: str = DEFAULT_ENV_PREFIX
    secrets_dir: Path | None = attrs.field(default=None)
    timeout: float = 5.0

    @secrets_dir.validator
    def _check_dir(self, _: object, value: Path | None) -> None:
        if value is not None:
            os.close(_open_dir(os.path.realpath(value)))

    @classmethod
    def unconfined(cls) -> SecretPolicy:
        """Any variable, any owner-only regular file: for references the operator wrote
        (the command line, an accounts file), which could name any of them anyway."""
        return cls(env_prefix="", secrets_dir=Path("/"))

    def confine(self, ref: SecretRef, what: str = "secret") -> tuple[str, PurePath]:
        """The secrets directory (resolved) and the file's path within it (symlinks
        resolved now); `SecretError` when the file is not under the directory."""
        if self.secrets_dir is None:
            raise SecretError(
                f"{what} {ref} refused: this worker has no secrets directory (--secrets-dir)"
            )
        root = os.path.realpath(self.secrets_dir)
        real = PurePath(os.path.realpath(ref.name))
        if not real.is_relative_to(root):
            raise SecretError(f"{what} {ref} refused: not under the secrets directory {root}")
        return root, real.relative_to(root)


async def read_secret(ref: SecretRef, policy: SecretPolicy, what: str = "secret") -> str:
    """The secret `ref` names, read now under `policy`; `SecretError` says why not."""
    if ref.kind == "env":
        if not ref.name.startswith(policy.env_prefix):
            raise SecretError(
                f"{what} {ref} refused: this worker reads only variables named "
                f"{policy.env_prefix}* (--secret-env-prefix)"
            )
        value = os.environ.get(ref.name)
        if value is None:
            raise SecretError(f"${ref.name} ({what}) is not set")
    else:
        root, inside = policy.confine(ref, what)
        try:
            value = await asyncio.wait_for(_off_loop(root, inside, what), policy.timeout)
        except asyncio.TimeoutError:
            raise SecretError(
                f"{what} file {ref.name}: not read within {policy.timeout:g}s"
            ) from None
    if len(value) >= _MIN_REDACTED:
        _known.add(value)
    return value


async def _off_loop(root: str, inside: PurePath, what: str) -> str:
    """`_read_file` in a daemon thread of its own: a read that hangs (a dead network file
    system) holds neither the loop, nor a shared executor, nor the process's exit."""
    future: concurrent.futures.Future[str] = concurrent.futures.Future()

    def read() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(_read_file(root, inside, what))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=read, name="secret-read", daemon=True).start()
    return await asyncio.wrap_future(future)


def _open_dir(root: str) -> int:
    """The secrets directory `root`, opened; refused unless it is a directory owned by
    this user or root that no one else can write (they could put any file in it)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretError(f"cannot use the secrets directory {root}: {exc.strerror}") from None
    info = os.fstat(fd)
    problem = None
    if info.st_uid not in (os.geteuid(), 0):
        problem = f"owned by uid {info.st_uid}, not this user"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"others can write it (mode {stat.S_IMODE(info.st_mode):o}): chmod 700 it"
    if problem is not None:
        os.close(fd)
        raise SecretError(f"secrets directory {root} refused: {problem}")
    return fd


def _read_file(root: str, inside: PurePath, what: str) -> str:
    """The file at `inside` under `root`, opened one component at a time from the
    directory, following no symlink: what the policy checked is what is read."""
    path = os.path.join(root, inside)
    fd = _open_dir(root)
    try:
        last = len(inside.parts) - 1
        for index, part in enumerate(inside.parts):
            # O_NOFOLLOW: a symlink put in place of a component after the check is refused
            # (ELOOP, or ENOTDIR where a folder was), never followed out; O_NONBLOCK:
            # opening a FIFO returns at once (and is then refused below), not waiting.
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            flags |= os.O_NONBLOCK if index == last else os.O_DIRECTORY
            try:
                next_fd = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a link where none was
                    raise SecretError(
                        f"{what} file {path} refused: its path changed after it was "
                        "checked (a symlink on it is not followed)"
                    ) from None
                raise SecretError(f"cannot read {what} file {path}: {exc.strerror}") from None
            os.close(fd)
            fd = next_fd
        return _read_open(fd, path, what)
    finally:
        os.close(fd)


def _read_open(fd: int, path: str, what: str) -> str:
    """The secret in the open file `fd`: an owner-only regular file of UTF-8 text."""
    info = os.fstat(fd)
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO) and stat.S_ISREG(info.st_mode):
        raise SecretError(
            f"{what} file {path} is readable by others "
            f"(mode {stat.S_IMODE(info.st_mode):o}): chmod 600 it"
        )
    data = _read_regular(fd, path, f"{what} file", MAX_SECRET_BYTES)
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretError(f"{what} file {path} is not UTF-8 text") from None


def read_regular_file(path: str, what: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them: opened without
    blocking, so a FIFO is refused at once instead of waited on (`_read_regular`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return _read_regular(fd, path, what, limit)
    finally:
        os.close(fd)


def _read_regular(fd: int, path: str, what: str, limit: int) -> bytes:
    """All of the open file `fd`, refused (`SecretError`) unless a regular file of at most
    `limit` bytes; never more than `limit` + 1 bytes are read."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise SecretError(f"{what} {path} is not a regular file")
    with open(fd, "rb", closefd=False) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise SecretError(f"{what} {path} is larger than {limit} bytes")
    return data


def redact(text: str) -> str:
    """`text` with every secret this process has read replaced by ``***``."""
    for secret in _known:
        if secret in text:
            text = text.replace(secret, "***")
    return text
