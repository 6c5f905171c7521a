"""Integrations with other tools, each behind its own extra (`contrib.dlt`: `[dlt]`)."""

__all__: list[str] = []
