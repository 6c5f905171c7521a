"""`SyncPlan`: the diff of the sync list against the store. Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from invoicing_async._models.session import SyncRevisions
from invoicing_async._sync.store import PendingEntry

__all__ = ["BATCH_SIZE", "SyncPlan", "batches_for", "plan_sync"]

BATCH_SIZE = 100


def batches_for(ids: int) -> int:
    """Sync-fetch requests for this many ids: ceil(ids / 100)."""
    return (ids + BATCH_SIZE - 1) // BATCH_SIZE


@attrs.frozen
class SyncPlan:
    """What a run will do: fetch `to_fetch` (in order), tombstone `to_delete`; `pending` is
    the plan to persist, `deletions_refused` why deletions are held back (or None)."""

    listed: int
    to_fetch: list[int]
    new: int
    changed: int
    pending: dict[int, PendingEntry]
    unchanged: int = 0
    to_delete: list[int] = attrs.field(factory=list)
    deletions_refused: str | None = None
    quarantined: list[int] = attrs.field(factory=list)
    #: Listed at a lower revision than stored: the service went back (restored from a
    #: backup). Fetched, and the service's copy taken although its revision is older.
    regressed: list[int] = attrs.field(factory=list)

    @property
    def batches(self) -> int:
        """Requests the fetch needs when nothing fails (the list is already spent)."""
        return batches_for(len(self.to_fetch))


def _recheck(before: PendingEntry | None, listed: int, stored: int) -> bool:
    """A stored invoice to fetch again although its revision (a Unix second) did not grow:
    it was fetched within that second and may have changed since."""
    return before is not None and not before.quarantined and before.revision == listed == stored


def plan_sync(
    listed: Mapping[int, int],
    stored: Mapping[int, int],
    pending: Mapping[int, PendingEntry],
    *,
    max_delete_share: float = 0.5,
    force_deletions: bool = False,
    now: float = 0.0,
    quarantine_for: float = float("inf"),
) -> SyncPlan:
    """Compare the sync list ({id: revision}) with the stored revisions.

    An id is fetched when new, listed at another revision (lower: `regressed`), or fetched
    within its revision's second. Ids quarantined at the same revision are skipped for
    `quarantine_for` seconds. Ids pending from an interrupted run go first."""
    if (
        not pending
        and isinstance(listed, SyncRevisions)
        and isinstance(stored, SyncRevisions)
        and listed.same_as(stored)
    ):  # nothing changed (the usual run): what the loop below finds, without it
        return SyncPlan(listed=len(listed), to_fetch=[], new=0, changed=0, pending={},
                        unchanged=len(listed))  # fmt: skip
    new: list[int] = []
    changed: list[int] = []
    unchanged = 0
    quarantined: list[int] = []
    regressed: list[int] = []
    plan_pending: dict[int, PendingEntry] = {}
    for ident, revision in listed.items():
        have = stored.get(ident)
        before = pending.get(ident)
        if have is not None and revision == have and not _recheck(before, revision, have):
            unchanged += 1
            continue
        attempts = before.attempts if before is not None and before.revision == revision else 0
        if before is not None and before.quarantined and before.revision == revision:
            if now - before.since < quarantine_for:
                quarantined.append(ident)
                plan_pending[ident] = before
                continue
            attempts = max(0, before.attempts - 1)  # one more try, then quarantine again
        plan_pending[ident] = PendingEntry(id=ident, revision=revision, attempts=attempts)
        (new if have is None else changed).append(ident)
        if have is not None and revision < have:
            regressed.append(ident)
    resumed = [i for i in pending if i in plan_pending and not plan_pending[i].quarantined]
    rest = [i for i in new + changed if i not in pending]
    to_fetch = resumed + rest

    gone = [i for i in stored if i not in listed]
    refused: str | None = None
    if gone and not force_deletions:
        if not listed:
            refused = "the sync list is empty; refusing to delete every stored invoice"
        elif len(gone) > max_delete_share * len(stored):
            refused = (
                f"{len(gone)} of {len(stored)} stored invoices are missing from the sync list, "
                f"more than max_delete_share={max_delete_share:.0%}; run with force_deletions "
                "if this is real"
            )
    return SyncPlan(
        listed=len(listed),
        to_fetch=to_fetch,
        new=len(new),
        changed=len(changed),
        unchanged=unchanged,
        to_delete=[] if refused else gone,
        deletions_refused=refused,
        quarantined=quarantined,
        pending=plan_pending,
        regressed=regressed,
    )
