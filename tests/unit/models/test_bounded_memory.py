"""What decoding remembers between answers is bounded in bytes, not only in count: a
service (or a proxy) that sends a new megabyte-long field name or value in every answer
leaves nothing behind once the models are gone (hardening round 5, point 6)."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from invoicing_async._models.converter import MOST_KEPT_NAME_CHARS, _make_model_hook
from invoicing_async._models.documents import load_model
from invoicing_async._models.payloads import Format
from invoicing_async._wire.scalars import MOST_CACHED_CHARS, TextCache
from invoicing_async.models import Invoice

MIB = 1 << 20
ANSWERS = 16
#: What may stay allocated after 16 answers of over a MiB each (16 MiB held without the
#: bounds): the bounded tables and caches themselves (256 names of 128 characters, 4,096
#: short texts) and noise.
MOST_HELD = 4 * MIB


def held_after(decode: Callable[[int], Any]) -> int:
    """Bytes still allocated after `decode(i)` for each of `ANSWERS` answers, every result dropped."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(ANSWERS):
            decode(i)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def huge_name(i: int) -> str:
    return f"x{i:04d}" + "n" * MIB


@pytest.fixture
def fresh_invoice_hook() -> Callable[[Any, Any], Invoice]:
    """A model hook with its own, empty table of names: the bound is then what the table
    can reach, not what earlier tests left in the shared one."""
    return _make_model_hook(Invoice)


def test_a_model_table_does_not_keep_megabyte_field_names(
    fresh_invoice_hook: Callable[[Any, Any], Invoice],
) -> None:
    def decode(i: int) -> None:
        invoice = fresh_invoice_hook({"id": i, huge_name(i): "value"}, Invoice)
        assert list(invoice.extra.values()) == ["value"]

    assert held_after(decode) < MOST_HELD


def test_a_model_table_still_remembers_short_unknown_names(
    fresh_invoice_hook: Callable[[Any, Any], Invoice],
) -> None:
    """The bound is on length: a name as long as the limit is remembered and decoded the
    same on the next answer."""
    name = "k" * MOST_KEPT_NAME_CHARS
    first = fresh_invoice_hook({"id": 1, name: 1}, Invoice)
    again = fresh_invoice_hook({"id": 2, name: 2}, Invoice)
    assert (first.extra, again.extra) == ({name: 1}, {name: 2})


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_answers_with_a_new_megabyte_name_each_leave_nothing_behind(fmt: Format) -> None:
    def decode(i: int) -> None:
        name = huge_name(i)
        if fmt == "json":
            body = json.dumps({"invoice": {"id": i, name: "v"}}).encode()
        else:
            body = f"<invoice><id type='integer'>{i}</id><{name}>v</{name}></invoice>".encode()
        invoice = load_model(body, fmt, Invoice)
        assert invoice.id == i
        assert len(invoice.extra) == 1

    assert held_after(decode) < MOST_HELD


def test_a_text_cache_parses_long_texts_without_keeping_them() -> None:
    cache = TextCache(str.upper)
    assert cache["a" * MOST_CACHED_CHARS] == "A" * MOST_CACHED_CHARS
    assert cache["b" * MIB] == "B" * MIB
    assert list(map(len, cache)) == [MOST_CACHED_CHARS]


def test_a_text_cache_holds_a_bounded_number_of_texts() -> None:
    cache = TextCache(str.upper)
    for i in range(10_000):
        assert cache[str(i)] == str(i)
    assert 0 < len(cache) <= 4096
