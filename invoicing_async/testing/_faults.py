"""Faults the fake service can inject, for reliability tests of the client and the engine."""

from __future__ import annotations

import random

import attrs

__all__ = ["FaultPlan"]


@attrs.define
class FaultPlan:
    """What goes wrong, and how often. Rates are probabilities per request (0 to 1).

    - `latency`: seconds added to every response.
    - `error_rate`: answer 500. `drop_rate`: close the connection without answering.
    - `timeout_rate`: hold the response for `timeout_delay` seconds (past the client's timeout).
    - `truncate_rate`: promise a body and send only half of it.
    - `missing_ids`: ids the sync list shows but sync fetch never returns.
    - `mutate_after_list`: after each sync list, this many listed invoices change
      (new revision) before the client fetches them.
    - `budget_cut_after`: after this many requests, every request gets the 403 of a
      spent budget (the hourly window cut short).
    - `only_paths`: when set, faults hit only paths containing one of these strings.
    """

    latency: float = 0.0
    error_rate: float = 0.0
    drop_rate: float = 0.0
    timeout_rate: float = 0.0
    timeout_delay: float = 120.0
    truncate_rate: float = 0.0
    missing_ids: set[int] = attrs.field(factory=set)
    mutate_after_list: int = 0
    budget_cut_after: int | None = None
    only_paths: tuple[str, ...] = ()
    seed: int = 0
    rng: random.Random = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def applies_to(self, path: str) -> bool:
        return not self.only_paths or any(p in path for p in self.only_paths)

    def roll(self, rate: float) -> bool:
        return rate > 0 and self.rng.random() < rate
