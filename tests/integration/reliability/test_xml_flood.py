"""An XML flood at the real limit (10 million elements from under 200 KB gzipped) is a
`DecodeError` naming the limit: slow, so apart from the unit tests' small-limit case."""

from __future__ import annotations

import gzip

import pytest

import invoicing_async as ia
from invoicing_async._wire.scalars import MAX_ELEMENTS
from invoicing_async._wire.xml import decode_xml

pytestmark = [pytest.mark.reliability, pytest.mark.slow]


def test_an_xml_flood_is_refused_before_it_is_built() -> None:
    body = b'<invoices type="array">' + b"<i/>" * (MAX_ELEMENTS + 1) + b"</invoices>"
    assert len(gzip.compress(body, compresslevel=1)) < 200_000
    with pytest.raises(ia.DecodeError, match="limit"):
        decode_xml(body)
