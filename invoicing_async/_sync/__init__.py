"""The sync engine, its stores and the push receiver."""
