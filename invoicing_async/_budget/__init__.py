"""The rate budget: the sans-I/O ledger, `RateBudget` and its shared stores."""
