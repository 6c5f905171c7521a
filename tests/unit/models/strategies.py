"""Hypothesis strategies for every model, built from the models' own field table."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from invoicing_async._models.fields import field_specs
from invoicing_async.models import Model

# Text that XML 1.0 can carry unchanged: no control characters (XML normalizes \r),
# no surrogates, no non-characters.
TEXT = st.text(
    alphabet=st.characters(exclude_categories=("Cs", "Cc", "Cn")) | st.sampled_from("\n\t"),
    max_size=30,
)
# Money-like values with many digits, and any finite decimal of a sane magnitude.
DECIMALS = st.decimals(
    min_value=Decimal("-1e15"), max_value=Decimal("1e15"), places=12
) | st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**20), max_value=10**20)
OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    int: st.integers(-(2**53), 2**53),
    str: TEXT,
    bool: st.booleans(),
    Decimal: DECIMALS,
    dt.date: st.dates(),
    dt.datetime: st.datetimes(timezones=OFFSETS),
}
EXTRA = st.dictionaries(
    st.from_regex(r"x_[a-z]{1,8}", fullmatch=True), TEXT | st.integers(-1000, 1000), max_size=3
)


def models(cls: type[Model], *, extra: bool = True) -> st.SearchStrategy[Any]:
    """Any instance of `cls`: every attribute unset (None) or set, collections of 0-3."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for spec in field_specs(cls):
        if spec.item_model is not None:
            fields[spec.name] = st.lists(models(spec.item_model, extra=extra), max_size=3)
        else:
            fields[spec.name] = st.none() | SCALARS[spec.base_type]
    if extra:
        fields["extra"] = EXTRA
    return st.builds(cls, **fields)
