"""Integrations with other tools, each behind its own extra (`contrib.dlt`: `[dlt]`,
`contrib.pandas`: `[pandas]`)."""

__all__: list[str] = []
