"""`StoreSuite`: the `Store` contract the sync engine relies on, as tests a store's author
runs by subclassing one class (``class TestMyStore(StoreSuite)`` with `make_store`).

A Hypothesis state machine drives a store and a reference model with the same writes and
compares every read; fixed cases add what a random walk rarely reaches (big documents,
concurrency, a second open of the same data, a handle left open as a crashed run leaves
it). Every case runs on an event loop of its own, so it needs no asyncio plugin and
runs alike in any asyncio mode."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._sync.store import BatchResult, PendingEntry, Store, write_outcome
from invoicing_async.models import Invoice

__all__ = ["STORE_SUITE_VERSION", "StoreSuite"]

#: The contract's version: raised when a case is added or tightened, so a store's author
#: can say which version their store passes (`StoreSuite.version`).
STORE_SUITE_VERSION = "1"

T = TypeVar("T")
AT = dt.datetime(2014, 7, 30, 12, 0, tzinfo=dt.timezone.utc)
IDS = st.integers(min_value=1, max_value=12)  # few: writes, deletions and revivals collide
TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00")
    | st.sampled_from("\n\t\"\\<&'"),
    max_size=40,
)


def invoice(ident: int, revision: int, po: str = "", **values: Any) -> Invoice:
    return Invoice(id=ident, revision=revision, po_number=po or f"r{revision}", **values)


def document(inv: Invoice, *, spaced: bool = False) -> InvoiceDocument:
    """The invoice as a store is given it; `spaced`: valid JSON in a layout no encoder of
    this package writes, so a store that writes anything but the bytes given shows."""
    doc = InvoiceDocument.of(inv)
    if not spaced:
        return doc
    return InvoiceDocument.of(inv, json.dumps(json.loads(doc.document), indent=1).encode())


def outcomes(result: BatchResult) -> dict[int, str]:
    return {i: kind for kind in ("created", "updated", "stale") for i in getattr(result, kind)}


@attrs.define
class Reference:
    """What a store must hold after the same calls: live documents, tombstoned ids, and
    the plan saved (of which an id written since may be gone: stores may drop it)."""

    live: dict[int, InvoiceDocument] = attrs.field(factory=dict)
    tombstones: set[int] = attrs.field(factory=set)
    saved: dict[int, PendingEntry] = attrs.field(factory=dict)
    written_since_save: set[int] = attrs.field(factory=set)
    revision_of: dict[int, int] = attrs.field(factory=dict)  # of every id ever written

    def apply(self, docs: Sequence[InvoiceDocument]) -> dict[int, str]:
        told: dict[int, str] = {}
        for doc in docs:
            assert doc.id is not None
            stored = self.revision_of.get(doc.id)
            told[doc.id] = outcome = write_outcome(
                doc.revision or 0, stored, deleted=doc.id in self.tombstones
            )
            self.written_since_save.add(doc.id)
            if outcome != "stale":
                self.live[doc.id] = doc
                self.revision_of[doc.id] = doc.revision or 0
                self.tombstones.discard(doc.id)
        return told

    def delete(self, ids: Iterable[int]) -> int:
        gone = {i for i in ids if i in self.live}
        for ident in gone:
            del self.live[ident]
            self.tombstones.add(ident)
        return len(gone)

    def revisions(self) -> dict[int, int]:
        return {i: doc.revision or 0 for i, doc in self.live.items()}


async def check_reads(store: Store, ref: Reference) -> None:
    """Every read of `store` agrees with `ref`: revisions, each get, the iteration in id
    order, and (for a store that keeps documents) the bytes as given."""
    assert dict(await store.revisions()) == ref.revisions(), "revisions()"
    for ident in sorted({*ref.live, *ref.tombstones}):
        got = await store.get(ident)
        if ident in ref.live:
            assert got == ref.live[ident].model(), f"get({ident}) is not what was written"
        else:
            assert got is None, f"get({ident}) of a deleted invoice"
    listed = [inv async for inv in store.iter_invoices()]
    assert [inv.id for inv in listed] == sorted(ref.live), "iter_invoices(): ids, in id order"
    assert listed == [ref.live[i].model() for i in sorted(ref.live)], "iter_invoices(): values"
    each_document = getattr(store, "iter_documents", None)
    if each_document is not None:
        kept = [bytes(d) async for d in each_document()]
        assert kept == [ref.live[i].document for i in sorted(ref.live)], (
            "iter_documents(): the documents byte for byte"
        )


async def check_pending(store: Store, ref: Reference) -> None:
    """The plan read back is the plan saved, less at most the ids written since."""
    found = await store.pending()
    for ident, entry in found.items():
        assert ref.saved.get(ident) == entry, f"pending()[{ident}] is not what was saved"
    missing = set(ref.saved) - set(found) - ref.written_since_save
    assert not missing, f"pending() lost {sorted(missing)}"


class StoreMachine(RuleBasedStateMachine):
    """Random writes, deletions, plans and reopens against a store and `Reference`."""

    suite: ClassVar[StoreSuite]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store: Store = self.run(self.suite.make_store())
        self.ref = Reference()
        self.persistent = True  # until reopen_store says otherwise

    def run(self, work: Awaitable[T]) -> T:
        return self.loop.run_until_complete(self.suite.within_patience(work))

    @rule(
        batch=st.lists(
            st.builds(
                lambda i, r, po, spaced: document(invoice(i, r, po), spaced=spaced),
                IDS,
                st.integers(min_value=0, max_value=4),
                TEXT,
                st.booleans(),
            ),
            max_size=6,
            unique_by=lambda d: d.id,
        )
    )
    def apply(self, batch: list[InvoiceDocument]) -> None:
        told = outcomes(self.run(self.store.apply_documents(batch)))
        assert told == self.ref.apply(batch), "apply_documents(): created / updated / stale"

    @rule(ids=st.lists(IDS, max_size=5))
    def delete(self, ids: list[int]) -> None:
        count = self.run(self.store.apply_deletions(ids, AT))
        assert count == self.ref.delete(ids), "apply_deletions(): how many were live"

    @rule(
        entries=st.dictionaries(
            IDS,
            st.tuples(
                st.integers(0, 9),
                st.integers(0, 5),
                st.booleans(),
                st.floats(0, 2e9, allow_nan=False),
            ),
            max_size=5,
        )
    )
    def save_pending(self, entries: dict[int, tuple[int, int, bool, float]]) -> None:
        plan = {
            i: PendingEntry(i, rev, attempts, quarantined, since if quarantined else 0.0)
            for i, (rev, attempts, quarantined, since) in entries.items()
        }
        self.run(self.store.save_pending(plan))
        self.ref.saved, self.ref.written_since_save = plan, set()

    @precondition(lambda self: self.persistent)
    @rule()
    def reopen(self) -> None:
        again = self.run(self.suite.reopen_store(self.store))
        if again is None:
            self.persistent = False
            return
        self.run(self.store.close())
        self.store = again

    @invariant()
    def reads_agree(self) -> None:
        self.run(check_reads(self.store, self.ref))
        self.run(check_pending(self.store, self.ref))

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            _close_loop(self.loop)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close `loop` as `asyncio.run` closes its own: what is left is cancelled first."""
    if loop.is_closed():
        return

    async def cancel_the_rest() -> None:
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)

    try:
        loop.run_until_complete(cancel_the_rest())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


class StoreSuite:
    """The `Store` conformance suite: subclass it in a test module and define `make_store`
    (a new, empty store each call); define `reopen_store` too when the store keeps its
    data between opens, and the persistence cases run as well::

        class TestMyStore(StoreSuite):
            async def make_store(self) -> Store:
                return MyStore(self.tmp_path / f"{self.fresh_name()}.db")

    `tmp_path` is pytest's for the test; `patience` bounds each call (a store whose lock
    is never released fails instead of hanging)."""

    version: ClassVar[str] = STORE_SUITE_VERSION
    patience: ClassVar[float] = 30.0
    tmp_path: Path
    _names: itertools.count[int]

    @pytest.fixture(autouse=True)
    def _store_suite_place(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._names = itertools.count(1)

    async def make_store(self) -> Store:
        """A new, empty store, opened (called once per case and per example)."""
        raise NotImplementedError("a StoreSuite subclass defines make_store()")

    async def reopen_store(self, store: Store) -> Store | None:  # noqa: ARG002 - for overrides
        """Another open of `store`'s data (a second process, or the next run), or None for
        a store that keeps nothing between opens. `store` is left open."""
        return None

    def fresh_name(self) -> str:
        """A name not used before in this test (a file, an account, a schema)."""
        return f"store{next(self._names)}"

    async def within_patience(self, work: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(work, self.patience)
        except asyncio.TimeoutError:
            raise AssertionError(
                f"the store did not answer within {self.patience} s: a lock never released?"
            ) from None

    def _case(self, body: Callable[[Store], Coroutine[Any, Any, None]]) -> None:
        """Run `body(store)` on a new store, in a loop of its own; the store is closed after."""

        async def case() -> None:
            store = await self.make_store()
            try:
                await self.within_patience(body(store))
            finally:
                await self.within_patience(store.close())

        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(case())
        finally:
            _close_loop(loop)

    def _persistent_case(self, body: Callable[[Store, Store], Coroutine[Any, Any, None]]) -> None:
        async def twice(store: Store) -> None:
            again = await self.reopen_store(store)
            if again is None:
                return
            try:
                await body(store, again)
            finally:  # bounded on its own: the case's patience may be what ended `body`
                await self.within_patience(again.close())

        if type(self).reopen_store is StoreSuite.reopen_store:
            pytest.skip("the store keeps nothing between opens (no reopen_store)")
        self._case(twice)

    # -- the state machine ----------------------------------------------------------------

    def test_random_calls_agree_with_the_reference(self) -> None:
        machine = type("Machine", (StoreMachine,), {"suite": self})
        run_state_machine_as_test(
            machine,
            settings=settings(
                stateful_step_count=12,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
            ),
        )

    # -- fixed cases ----------------------------------------------------------------------

    def test_new_updated_and_stale_are_told_apart(self) -> None:
        async def body(store: Store) -> None:
            first = await store.apply_documents(
                [document(invoice(1, 10)), document(invoice(2, 10))]
            )
            assert outcomes(first) == {1: "created", 2: "created"}
            second = await store.apply_documents(
                [
                    document(invoice(1, 11, "newer")),
                    document(invoice(2, 9, "older")),
                    document(invoice(3, 1)),
                ]
            )
            assert outcomes(second) == {1: "updated", 2: "stale", 3: "created"}
            assert dict(await store.revisions()) == {1: 11, 2: 10, 3: 1}
            kept = await store.get(2)
            assert kept is not None
            assert kept.po_number == "r10", "an older revision overwrote"
            same = await store.apply_documents([document(invoice(1, 11, "same second, later"))])
            assert same.updated == [1], "an equal revision (a later fetch) must overwrite"
            one = await store.get(1)
            assert one is not None
            assert one.po_number == "same second, later"

        self._case(body)

    def test_every_outcome_of_the_revision_rule(self) -> None:
        cases = [(None, False, 5), (10, False, 9), (10, False, 10), (10, False, 11), (10, True, 3)]

        async def body(store: Store) -> None:
            ids = range(1, len(cases) + 1)
            await store.apply_documents(
                [
                    document(invoice(i, before))
                    for i, (before, _, _) in zip(ids, cases, strict=True)
                    if before
                ]
            )
            await store.apply_deletions(
                [i for i, (_, gone, _) in zip(ids, cases, strict=True) if gone], AT
            )
            result = await store.apply_documents(
                [
                    document(invoice(i, fetched, "fetched"))
                    for i, (_, _, fetched) in zip(ids, cases, strict=True)
                ]
            )
            assert outcomes(result) == {
                i: write_outcome(fetched, before, deleted=gone)
                for i, (before, gone, fetched) in zip(ids, cases, strict=True)
            }
            assert dict(await store.revisions()) == {1: 5, 2: 10, 3: 10, 4: 11, 5: 3}

        self._case(body)

    def test_tombstones_and_revival(self) -> None:
        async def body(store: Store) -> None:
            await store.apply_documents([document(invoice(i, 1)) for i in (1, 2, 3)])
            assert await store.apply_deletions([1, 2, 99], AT) == 2
            assert await store.apply_deletions([1], AT) == 0, "a tombstone counted as live"
            assert await store.get(1) is None
            assert dict(await store.revisions()) == {3: 1}
            assert [i.id async for i in store.iter_invoices()] == [3]
            revived = await store.apply_documents([document(invoice(1, 1, "back"))])
            assert revived.created == [1], "a deleted invoice listed again comes back"
            back = await store.get(1)
            assert back is not None
            assert back.po_number == "back"

        self._case(body)

    def test_the_pending_plan_and_its_quarantine_round_trip(self) -> None:
        entries = {
            4: PendingEntry(id=4, revision=7),
            5: PendingEntry(id=5, revision=8, attempts=3, quarantined=True, since=1234.5),
            6: PendingEntry(id=6, revision=1, attempts=1),
        }

        async def body(store: Store) -> None:
            assert await store.pending() == {}
            await store.save_pending(entries)
            assert await store.pending() == entries
            await store.save_pending({5: entries[5]})
            assert await store.pending() == {5: entries[5]}, "a plan replaces the last one"
            await store.save_pending({})
            assert await store.pending() == {}

        self._case(body)

    def test_documents_are_read_back_byte_for_byte(self) -> None:
        big = "é€😀<&>\"'\\\n" * 12_000  # about 120 KB, every escape JSON and SQL know
        docs = [
            document(invoice(1, 1, description=big)),
            document(invoice(2, 1, "spaced", description="x" * 5000), spaced=True),
            document(invoice(3, 1, "", description="")),
        ]

        async def body(store: Store) -> None:
            await store.apply_documents(docs)
            for doc in docs:
                assert doc.id is not None
                assert await store.get(doc.id) == doc.model(), f"invoice {doc.id} changed"
            each_document = getattr(store, "iter_documents", None)
            if each_document is not None:
                assert [bytes(d) async for d in each_document()] == [d.document for d in docs]

        self._case(body)

    def test_documents_of_the_service_in_both_formats(self) -> None:
        from invoicing_async._models.stored import load_invoice_documents
        from invoicing_async.testing._service import FakeInvoicingService
        from invoicing_async.testing._writers import dump_list

        service = FakeInvoicingService(invoices=25, seed=4)  # its data only: never started
        invoices = sorted(service.account.invoices.values(), key=lambda inv: inv.id or 0)

        async def body(store: Store) -> None:
            for fmt in ("xml", "json"):
                docs, failed = load_invoice_documents(
                    dump_list(invoices, fmt, Invoice), fmt, limit=100
                )
                assert failed == []
                await store.apply_documents(docs)
                assert [i async for i in store.iter_invoices()] == invoices, fmt

        self._case(body)

    def test_many_invoices_are_all_listed_and_iterated(self) -> None:
        async def body(store: Store) -> None:
            for start in range(1, 1301, 100):
                await store.apply_documents(
                    [document(invoice(i, i % 7)) for i in range(start, start + 100)]
                )
            assert await store.apply_deletions(range(2, 1301, 3), AT) == 433
            live = [i for i in range(1, 1301) if i % 3 != 2]
            assert dict(await store.revisions()) == {i: i % 7 for i in live}
            assert [inv.id async for inv in store.iter_invoices()] == live

        self._case(body)

    def test_odd_input(self) -> None:
        async def body(store: Store) -> None:
            empty = await store.apply_documents([])
            assert outcomes(empty) == {}
            no_id = InvoiceDocument.of(Invoice(po_number="no id"))
            large = 2**53
            result = await store.apply_documents([no_id, document(invoice(large, 0))])
            assert outcomes(result) == {large: "created"}, "a document without an id is skipped"
            assert dict(await store.revisions()) == {large: 0}
            assert await store.apply_deletions([], AT) == 0
            assert await store.apply_deletions(iter([404, 405]), AT) == 0
            assert await store.get(404) is None
            assert await store.get(-1) is None
            assert await store.apply_deletions((i for i in [large, large]), AT) == 1

        self._case(body)

    def test_concurrent_calls_on_one_store(self) -> None:
        async def body(store: Store) -> None:
            batches = [[document(invoice(i, r)) for i in range(1, 30)] for r in range(1, 9)]
            await asyncio.gather(
                *(store.apply_documents(b) for b in batches),
                *(store.revisions() for _ in range(4)),
                store.save_pending({1: PendingEntry(1, 1)}),
            )
            assert dict(await store.revisions()) == dict.fromkeys(range(1, 30), 8)
            counts = await asyncio.gather(*(store.apply_deletions(range(1, 30), AT) for _ in "ab"))
            assert sorted(counts) == [0, 29], "a deletion counted twice by concurrent calls"
            assert dict(await store.revisions()) == {}

        self._case(body)

    def test_a_store_reopened_has_everything_committed(self) -> None:
        async def body(store: Store, again: Store) -> None:
            ref = Reference()
            docs = [
                document(invoice(i, 2, description="ü" * 300), spaced=i % 2 == 0)
                for i in range(1, 9)
            ]
            await store.apply_documents(docs)
            ref.apply(docs)
            await store.apply_deletions([3, 4], AT)
            ref.delete([3, 4])
            plan = {7: PendingEntry(7, 3, 2, True, 99.5), 20: PendingEntry(20, 1)}
            await store.save_pending(plan)
            ref.saved = plan
            await check_reads(again, ref)
            await check_pending(again, ref)

        self._persistent_case(body)

    def test_a_crashed_run_resumes_from_what_it_committed(self) -> None:
        """A run that died holds its store open; the next run opens the same data, finds its
        plan and the batches it committed, and finishes."""

        async def body(crashed: Store, resumed: Store) -> None:
            plan = {i: PendingEntry(i, 5) for i in range(1, 11)}
            await crashed.save_pending(plan)
            await crashed.apply_documents([document(invoice(i, 5)) for i in range(1, 6)])
            left = await resumed.pending()
            assert set(left) <= set(plan)
            assert set(left) >= set(range(6, 11)), "the plan of the crashed run is gone"
            assert dict(await resumed.revisions()) == dict.fromkeys(range(1, 6), 5)
            done = await resumed.apply_documents([document(invoice(i, 5)) for i in range(1, 11)])
            assert sorted(done.created) == list(range(6, 11))
            assert sorted(done.updated) == list(range(1, 6))
            await resumed.save_pending({})
            assert await crashed.pending() == {}

        self._persistent_case(body)

    def test_two_opens_of_the_same_data_write_concurrently(self) -> None:
        async def body(one: Store, two: Store) -> None:
            await asyncio.gather(
                one.apply_documents([document(invoice(i, 2)) for i in range(1, 40, 2)]),
                two.apply_documents([document(invoice(i, 2)) for i in range(2, 41, 2)]),
            )
            stale = await two.apply_documents([document(invoice(1, 1, "older"))])
            assert stale.stale == [1], "the revision rule holds across opens"
            counts = await asyncio.gather(
                one.apply_deletions(range(1, 11), AT), two.apply_deletions(range(1, 11), AT)
            )
            assert sum(counts) == 10, "a deletion counted by both opens"
            for store in (one, two):
                assert dict(await store.revisions()) == dict.fromkeys(range(11, 41), 2)

        self._persistent_case(body)
