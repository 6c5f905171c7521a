"""Top-level JSON arrays are read a piece at a time (`array_pieces`); the pieces are made
tiny here so every cut (inside a member, a string, a nested object, between members) is
tried, and each result is held to one decode of the whole body."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import invoicing_async._wire.json as wire_json
from invoicing_async._wire.json import iter_members
from invoicing_async.errors import DecodeError

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
TREES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)
MEMBERS = st.dictionaries(st.text(max_size=5), TREES, max_size=4) | st.lists(TREES, max_size=3)
SPACE = st.sampled_from(["", " ", "\n", "\t ", "\r\n  "])


def members_of(body: bytes, piece: int) -> Any:
    """The members' bytes `iter_members` hands on with pieces of `piece` bytes, or its error."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wire_json, "_PIECE", piece)
        try:
            return list(iter_members(body))
        except DecodeError:
            return "refused"


def whole(body: bytes) -> Any:
    try:
        return list(map(bytes, msgspec.json.decode(body, type=list[msgspec.Raw])))
    except (msgspec.DecodeError, ValueError):
        return "refused"


@settings(deadline=None)
@given(st.lists(MEMBERS, max_size=12), SPACE, st.integers(1, 40), st.data())
def test_members_are_those_of_the_whole_body(
    members: list[Any], space: str, piece: int, data: st.DataObject
) -> None:
    text = "[" + space + ("," + space).join(json.dumps(m, ensure_ascii=False) for m in members)
    body = (text + space + "]" + space).encode()
    assert members_of(body, piece) == whole(body)
    # Cut anywhere, or with a stray character put anywhere: the same members, or refused.
    at = data.draw(st.integers(0, len(body)))
    stray = data.draw(st.sampled_from([b"x", b"]", b",", b"},", b"\xff"]))
    for broken in (body[:at], body[:at] + stray + body[at:]):
        assert members_of(broken, piece) == whole(broken)


@pytest.mark.parametrize(
    "body",
    [b"[1, 2, 3]", b'[{"a": 1}] [', b'[{"a": 1}', b'  [{"a": 1},, {"b": 2}]', b'[{"a":1},]',
     b"[]", b"[ ]", b"{}", b'[{"a": {"b": 1}},{"c": [{"d": 2},{"e": 3}]}]'],
)  # fmt: skip
def test_unusual_bodies_read_as_the_whole_body_reads_them(body: bytes) -> None:
    for piece in (1, 2, 3, 5, 8):
        assert members_of(body, piece) == whole(body)
