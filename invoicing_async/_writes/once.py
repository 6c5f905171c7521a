"""The I/O around the decisions of `core`: claim the key, send, record the outcome; on an
ambiguous failure look at the service, then return what was applied or send once more."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import attrs

from invoicing_async._transport.retry import RetryPolicy
from invoicing_async._writes.core import Intent, Kind, Step, check_key, fingerprint
from invoicing_async._writes.journal import Journal, new_owner
from invoicing_async.errors import (
    APIConnectionError,
    DecodeError,
    ResponseTooLargeError,
    ServerError,
    WriteUnsettledError,
)

__all__ = ["Answer", "KeyedWrite", "Look", "Send", "Writes"]

#: Seconds a writer holds a key it claimed; a writer of this host that died frees it at once.
LEASE = 600.0
# Failures after which the write may have been applied: settled by looking.
AMBIGUOUS = (APIConnectionError, ServerError, DecodeError, ResponseTooLargeError)
_WAITS = 200  # polls of a key another writer holds (0.05 s doubling to 2 s: > the lease)


class Answer(NamedTuple):
    """The applied write's answer document (the journal's replay), the id it made, and its
    model when it had to be decoded to be told apart."""

    body: bytes
    ident: int | None = None
    model: object = None


Send = Callable[[], Awaitable[Answer]]
#: What a look found: the applied answer, or None when the write certainly was not applied.
Look = Callable[[Intent], Awaitable[Answer | None]]


class KeyedWrite(NamedTuple):
    """A write with its key: what `intent` records of it before it is sent."""

    kind: Kind
    key: str
    target: int | None
    body: bytes
    detail: str = ""


@attrs.define
class Counts:
    """What the keyed writes of a client did (for the benchmark and tests)."""

    ambiguous: int = 0
    looks: int = 0
    resent: int = 0
    replayed: int = 0


class Writes:
    """A client's keyed writes: its journal, the account (the keys' scope) and its owner name."""

    def __init__(
        self,
        journal: Journal,
        scope: str,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.journal = journal
        self.scope = scope
        self.owner = new_owner()
        self.counts = Counts()
        self._sleep = sleep

    def intent(self, write: KeyedWrite) -> Intent:
        """The intent of `write`, refused (`IdempotencyKeyError`) for a key no marker holds."""
        check_key(write.key)
        return Intent(
            scope=self.scope,
            key=write.key,
            kind=write.kind,
            target=write.target,
            fingerprint=fingerprint(write.kind, write.target, write.body),
            detail=write.detail,
            at=time.time(),
        )

    async def run(self, write: KeyedWrite, send: Send, look: Look, retry: RetryPolicy) -> bytes:
        """The answer of `write`, applied at most once for its key; the journal's answer when
        the key was applied before."""
        intent = self.intent(write)
        delay = 0.05
        for _ in range(_WAITS):
            claim = await self.journal.claim(intent, self.owner, time.time() + LEASE)
            if claim.step is not Step.WAIT:
                break
            await self._sleep(delay)
            delay = min(delay * 2, 2.0)
        else:
            raise WriteUnsettledError(
                f"idempotency key {write.key!r} is held by another writer", key=write.key
            )
        if claim.step is Step.REPLAY:
            self.counts.replayed += 1
            assert claim.record.result is not None
            return claim.record.result
        intent = claim.record.intent
        if claim.step is Step.SETTLE:
            found = await self._look(intent, look, None)
            if found is not None:
                return found.body
        return await self._send(intent, send, look, retry)

    async def settle(self, intent: Intent, look: Look) -> bool | None:
        """Settle one pending intent by looking: True applied, False not (the key freed),
        None when another writer holds it now."""
        claim = await self.journal.claim(intent, self.owner, time.time() + LEASE)
        if claim.step is Step.REPLAY:
            return True
        if claim.step is Step.WAIT:
            return None
        found = await self._look(claim.record.intent, look, None)
        if found is None:
            await self.journal.release(claim.record.intent, self.owner)
        return found is not None

    async def _send(self, intent: Intent, send: Send, look: Look, retry: RetryPolicy) -> bytes:
        for attempt in range(1, retry.attempts + 1):
            try:
                answer = await send()
            except AMBIGUOUS as exc:
                self.counts.ambiguous += 1
                found = await self._look(intent, look, exc)
                if found is not None:
                    return found.body
                if attempt == retry.attempts:
                    await self.journal.release(intent, self.owner)
                    raise  # certainly not applied, and no attempts left
                self.counts.resent += 1
                await self._sleep(retry.delay(attempt))
                continue
            except Exception:
                # Refused (4xx) or never sent (budget): certainly not applied.
                await self.journal.release(intent, self.owner)
                raise
            except BaseException:
                # Cancelled mid-write: the next use of the key settles it by looking.
                await asyncio.shield(self.journal.expire(intent, self.owner))
                raise
            await self.journal.applied(intent, self.owner, answer.body, answer.ident)
            return answer.body
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _look(self, intent: Intent, look: Look, cause: BaseException | None) -> Answer | None:
        """What the service shows of `intent`: recorded when applied; unsettled when the look
        fails too (the intent stays, its lease dropped so the next use settles it)."""
        self.counts.looks += 1
        try:
            found = await look(intent)
        except Exception as exc:
            await self.journal.expire(intent, self.owner)
            raise WriteUnsettledError(
                f"{intent.kind} with idempotency key {intent.key!r} may have been applied "
                f"({cause or 'left pending'}), and looking failed ({exc}): the journal keeps "
                "it; the next use of the key or resolve_pending_writes() settles it",
                key=intent.key,
            ) from (cause or exc)
        if found is not None:
            await self.journal.applied(intent, self.owner, found.body, found.ident)
        return found
