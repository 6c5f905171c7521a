"""Large JSON lists are read a window at a time, never as one text of the whole body; the
windows are made tiny here so every edge (inside a member, a string, a multi-byte
character, between members) is crossed, and each result is held to the whole-text path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import invoicing_async._wire.json as wire_json
from invoicing_async._wire.json import decode_json, iter_json_array, iter_json_array_text
from invoicing_async.errors import DecodeError

LEAVES = st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False)
TREES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)
MEMBERS = st.dictionaries(st.text(max_size=5), TREES, max_size=4) | st.lists(TREES, max_size=3)
SPACE = st.sampled_from(["", " ", "\n", "\t ", "\r\n  "])
Outcome = tuple[list[Any], str | None]


def _outcome(read: Callable[[], Iterator[Any] | None]) -> Outcome:
    """What a reader hands on before it stops, and the error it stops with."""
    got: list[Any] = []
    try:
        members = read()  # the whole-text path refuses some bodies at once
        if members is None:
            return got, "not an array"
        for member in members:
            got.append(member)
    except DecodeError as exc:
        return got, str(exc)
    return got, None


def _both(
    monkeypatch: pytest.MonkeyPatch, body: bytes, window: int
) -> tuple[tuple[Outcome, Outcome], ...]:
    """(windowed, whole text), each with the outcome of both readers."""
    outcomes: list[tuple[Outcome, Outcome]] = []
    for size in (window, 1 << 40):  # 2**40: never windowed
        monkeypatch.setattr(wire_json, "_WINDOW", size)
        outcomes.append(
            (
                _outcome(lambda: iter_json_array(body)),
                _outcome(lambda: iter_json_array_text(body)),
            )
        )
    return tuple(outcomes)


@settings(deadline=None)
@given(st.lists(MEMBERS, max_size=12), SPACE, st.integers(1, 40), st.data())
def test_members_and_their_text_are_those_of_the_whole_text(
    members: list[Any], space: str, window: int, data: st.DataObject
) -> None:
    text = "[" + space + ("," + space).join(json.dumps(m, ensure_ascii=False) for m in members)
    text += space + "]" + space
    body = text.encode()
    with pytest.MonkeyPatch.context() as mp:
        windowed, whole = _both(mp, body, window)
    assert windowed == whole
    if whole[0][1] is None:  # unless a number is beyond what the decoder takes
        assert whole[0][0] == json.loads(text, parse_float=Decimal)
    # Cut anywhere, or with a stray character put anywhere: the same members, the same error.
    at = data.draw(st.integers(0, len(body)))
    for broken in (body[:at], body[:at] + data.draw(st.sampled_from([b"x", b"]", b",", b"\xff"]))
                   + body[at:]):  # fmt: skip
        with pytest.MonkeyPatch.context() as mp:
            windowed, whole = _both(mp, broken, window)
        _alike(windowed, whole)


def _alike(windowed: tuple[Outcome, Outcome], whole: tuple[Outcome, Outcome]) -> None:
    """The same members and error. Except: the whole-text path refuses a body that is not
    UTF-8 before its first member; the windowed one reads on to the bad byte, handing the
    members before it, and stops there or at an earlier fault (a number out of range)."""
    for (got, error), (expected, expected_error) in zip(windowed, whole, strict=True):
        if expected_error is not None and "not UTF-8" in expected_error:
            assert error is not None
            assert got[: len(expected)] == expected
        else:
            assert (got, error) == (expected, expected_error)


def test_a_long_list_is_never_one_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """2 MB of members in 64 KB windows: `_text` (the whole-body text) is never called."""
    members = [{"invoice": {"id": i, "name": "Müller & Søn " * 20}} for i in range(5000)]
    body = json.dumps(members, ensure_ascii=False).encode()
    assert len(body) > 1_000_000
    monkeypatch.setattr(wire_json, "_WINDOW", 1 << 16)

    def refused(body: bytes) -> str:
        raise AssertionError("the whole body was made one text")

    monkeypatch.setattr(wire_json, "_text", refused)
    assert list(iter_json_array(body) or []) == members
    assert [t for _, t in iter_json_array_text(body) or []][-1] == json.dumps(
        members[-1], ensure_ascii=False
    )
    assert decode_json(body) == members


@pytest.mark.parametrize(
    "body",
    [
        b"[1, 2, 3]",  # scalars could end at a window's edge and still parse
        b'[{"a": 1}] [',  # data after the array
        b'[{"a": 1}',  # never closed
        b'[{"a": "\xc3"}]',  # not UTF-8
        b'  [{"a": 1},, {"b": 2}]',
        b"[]",
        b"[ ]",
    ],
)
def test_unusual_bodies_read_as_the_whole_text_reads_them(
    monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    for window in (1, 2, 3, 5, 8):
        windowed, whole = _both(monkeypatch, body, window)
        _alike(windowed, whole)


def test_a_long_sync_list_read_in_windows_stays_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A member cut by a window's edge is parsed again in the next window, so its id
    reaches the sync list twice: that must not make an ordered list look unordered
    (ordering a million entries cost the diff ~100 MB)."""
    from invoicing_async._models import documents

    monkeypatch.setattr(wire_json, "_WINDOW", 1 << 12)
    monkeypatch.setattr(documents, "read_json_sync_pairs", lambda _body: None)  # the general path
    count = 20_000
    body = json.dumps(
        [{"invoice": {"id": i, "revision": 1000 + i % 7}} for i in range(1, count + 1)]
    ).encode()
    assert len(body) > 1 << 12
    revisions = documents.load_sync_revisions(body, "json")
    assert len(revisions._ids) == count  # noqa: SLF001 - each id once, no re-sort needed
    assert revisions._sorted  # noqa: SLF001
    assert dict(revisions.items()) == {i: 1000 + i % 7 for i in range(1, count + 1)}
