"""How to install an optional extra, for the errors that need one.

The package is not on a public index: an extra is installed from a checkout (or a wheel
built from one), so the hint says that rather than a `pip install` that cannot work.
"""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """`install the [extra] extra: …`, to follow what is missing in an error message."""
    return f"install the [{extra}] extra: pip install -e '.[{extra}]' from a checkout"
