"""Memory bombs under the element limit: a body of millions of empty members, a few
kilobytes gzipped, is refused as a `DecodeError` by every reader that could meet it, in
a process whose address space is capped at a gigabyte (the bound the docs promise)."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.stress  # children under an address-space cap

CAP = 1 << 30  # bytes of address space for the whole child process
MEMBERS = 9_900_000  # under the limit of 10,000,000 values a response may hold

CHILD = textwrap.dedent(
    """
    import gzip, resource, sys
    from invoicing_async._models.documents import load_list
    from invoicing_async._models.stored import load_invoice_documents
    from invoicing_async.errors import DecodeError
    from invoicing_async.models import Invoice

    fmt, path, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
    body = gzip.decompress(open(path, "rb").read())
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for name, read in (
        ("sync-fetch", lambda: load_invoice_documents(body, fmt, limit=100)),
        ("list", lambda: load_list(body, fmt, Invoice)),
    ):
        try:
            read()
        except DecodeError as exc:
            print(name, "refused:", exc)
        else:
            print(name, "read in full")
    # VmHWM: this process's own peak (ru_maxrss would carry the parent's over exec).
    status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
    print("peak KiB", status)
    """
)


def bomb(fmt: str) -> bytes:
    if fmt == "json":
        body = b"[" + b",".join([b"{}"] * MEMBERS) + b"]"
    else:
        body = b'<invoices type="array">' + b"<invoice/>" * MEMBERS + b"</invoices>"
    return gzip.compress(body, 9)


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_millions_of_empty_members_are_refused_within_a_gigabyte(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"bomb.{fmt}.gz"
    path.write_bytes(bomb(fmt))
    assert path.stat().st_size < 200_000  # kilobytes on the wire
    done = subprocess.run(
        [sys.executable, "-c", CHILD, fmt, str(path), str(CAP)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("sync-fetch refused: a reply of more than 100 members"), lines
    assert lines[1].startswith("list refused: a list reply of more than"), lines
    assert int(lines[2].split()[-1]) * 1024 < CAP
