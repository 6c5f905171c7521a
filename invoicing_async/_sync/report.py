"""What a sync run reports: the run's totals, progress ticks and committed batches."""

from __future__ import annotations

import attrs

from invoicing_async.models import Invoice

__all__ = ["BatchCommitted", "SyncProgress", "SyncReport"]


@attrs.define
class SyncReport:
    """What a run did. `requests` counts every HTTP request, retries included."""

    listed: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    fetched: int = 0
    stale: int = 0
    ignored: int = 0  # invoices in replies that were not asked for, or older duplicates
    unreadable: dict[int, str] = attrs.field(factory=dict)  # id -> why it cannot be read
    rechecks: int = 0  # fetched within their revision's own second: fetched again next run
    requests: int = 0
    batches: int = 0
    planned: int = 0
    needed_requests: int = 0  # fetch requests the plan needs when nothing fails
    budget_available: int = 0  # requests the budget allowed without waiting, at plan time
    pending: list[int] = attrs.field(factory=list)
    quarantined: list[int] = attrs.field(factory=list)
    deletions_refused: str | None = None
    stopped_for_budget: bool = False
    eta: float | None = None
    errors: list[str] = attrs.field(factory=list)
    dry_run: bool = False
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Everything listed is stored (or quarantined) and nothing stopped the run."""
        return not self.pending and not self.stopped_for_budget and not self.errors

    def to_dict(self) -> dict[str, object]:
        data = attrs.asdict(self)
        data["complete"] = self.complete
        return data


@attrs.frozen
class SyncProgress:
    """Handed to the progress callback after each committed batch."""

    done: int
    total: int
    requests: int
    budget_left: int
    eta: float | None


@attrs.frozen
class BatchCommitted:
    """Handed to `on_batch` after a batch is committed: what changed, what was deleted."""

    changed: list[Invoice]
    deleted: list[int]
