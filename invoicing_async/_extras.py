"""How to install an optional extra (from a checkout: the package is on no public index)."""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """`install the [extra] extra: …`, to follow what is missing in an error message."""
    return f"install the [{extra}] extra: pip install -e '.[{extra}]' from a checkout"
