"""The JSON sync list's fast path (`read_json_sync_pairs`) gives what the general reader
gives: the same pairs for the usual shape, and it gives up on anything else, so the
general reader decides (same pairs, or the same error)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing_async._models import documents
from invoicing_async._models.documents import load_sync_revisions
from invoicing_async._wire.json_sync import read_json_sync_pairs
from invoicing_async.errors import DecodeError

INTS = st.integers(-(2**63), 2**63 - 1) | st.integers() | st.sampled_from([2**63, -(2**63) - 1])
ODD: st.SearchStrategy[Any] = st.sampled_from(["7", " 7", "x", None, True, 1.5, [], {}])


@st.composite
def members(draw: st.DrawFn) -> Any:
    pair: dict[str, Any] = {"id": draw(INTS), "revision": draw(INTS)}
    bend = draw(st.sampled_from(["none"] * 6 + ["odd id", "odd rev", "extra", "drop", "bare"]))
    if bend == "odd id":
        pair["id"] = draw(ODD)
    elif bend == "odd rev":
        pair["revision"] = draw(ODD)
    elif bend == "extra":
        pair["updated_at"] = "2014-07-30T17:33:41+02:00"
    elif bend == "drop":
        del pair[draw(st.sampled_from(["id", "revision"]))]
    elif bend == "bare":
        return pair
    return {"invoice": pair}


def read(body: bytes) -> Any:
    try:
        return sorted(load_sync_revisions(body, "json").items())
    except DecodeError as exc:
        return ("error", str(exc))


def general(body: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patched:
        patched.setattr(documents, "read_json_sync_pairs", lambda _body: None)
        return read(body)


@settings(deadline=None)
@given(st.lists(members(), max_size=12))
def test_any_sync_list_reads_as_the_general_reader_reads_it(listed: list[Any]) -> None:
    body = json.dumps(listed).encode()
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert read(body) == general(body, monkeypatch)


def test_the_usual_shape_takes_the_fast_path() -> None:
    body = b'[{"invoice":{"id":3,"revision":9}},{"invoice":{"id":1,"revision":4}},'
    body += b'{"invoice":{"id":3,"revision":12}}]'
    pairs = read_json_sync_pairs(body)
    assert pairs is not None
    assert (list(pairs[0]), list(pairs[1])) == ([3, 1, 3], [9, 4, 12])
    assert dict(load_sync_revisions(body, "json")) == {1: 4, 3: 12}  # the highest of an id


@pytest.mark.parametrize(
    "body",
    [
        b'{"invoices":[{"invoice":{"id":1,"revision":2}}]}',  # a root object
        b'[{"id":1,"revision":2}]',  # bare members
        b'[{"invoice":{"id":"1","revision":2}}]',
        b'[{"invoice":{"id":1,"revision":2,"x":0}}]',
        b'[{"invoice":{"id":9223372036854775808,"revision":2}}]',
        b'[{"invoice":{"id":1,"revision":2}}',
        b'[{"invoice":{"id":1,"revision":2}},{"\x80":1}]',  # not UTF-8
        b'[{"invoice":{"id":1,"revision":2,"\xed\xa0\x80":0}}]',
    ],
)
def test_anything_else_is_left_to_the_general_reader(body: bytes) -> None:
    assert read_json_sync_pairs(body) is None


def test_a_long_sync_list_stays_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 4 MiB (100,000 entries), read a piece at a time: the general reader, 15 times
    dearer per entry, is never asked, so the cost per entry is that of a short list."""
    count = 100_000
    body = json.dumps(
        [{"invoice": {"id": i, "revision": 1000 + i % 7}} for i in range(1, count + 1)]
    ).encode()
    assert len(body) > 4 << 20

    def general_reader(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the general reader was asked")

    monkeypatch.setattr(documents, "decode_json", general_reader)
    revisions = load_sync_revisions(body, "json")
    assert len(revisions) == count
    assert dict(revisions.items()) == {i: 1000 + i % 7 for i in range(1, count + 1)}
