"""The sync engine and its stores."""
