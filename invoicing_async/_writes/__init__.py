"""Writes that happen once: idempotency keys, the write journal, settled by looking."""
