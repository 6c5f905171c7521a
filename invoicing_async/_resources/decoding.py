"""Decoding off the event loop: a large response is decoded in a worker thread (1,000
invoices inline stalled the loop for 0.9 s; in a thread, about 5 ms); small bodies inline."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from invoicing_async._models.base import Model
from invoicing_async._models.documents import Format, each_model_batch

__all__ = ["OFF_LOOP_BYTES", "decode_off_loop", "iter_models", "own_pool"]

T = TypeVar("T")
M = TypeVar("M", bound=Model)

#: Bodies larger than this are decoded in a worker thread (about 20 XML invoices).
OFF_LOOP_BYTES = 32 * 1024
#: Batches of decoded models that may wait for the consumer of `iter_models`.
_AHEAD = 4


_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def own_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The package's own small thread pools, one per name, made on first use and shared by
    the process: one decoding thread (each allocating thread costs a malloc arena; decoding
    holds the GIL anyway), the SQLite store's threads."""
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(workers, thread_name_prefix=name)
        return pool


def _forget_pools_in_child() -> None:
    """In a forked child: the parent's pool threads do not exist here, and a pool that
    believes one of them idle would queue work that never runs (a sync that hangs)."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_in_child)


async def decode_off_loop(decode: Callable[..., T], body: bytes, *args: Any) -> T:
    """`decode(body, *args)`, in the decoding thread when the body is large."""
    if len(body) <= OFF_LOOP_BYTES:
        return decode(body, *args)
    loop = asyncio.get_running_loop()
    call = functools.partial(decode, body, *args)
    return await loop.run_in_executor(own_pool("invoicing-decode", 1), call)


class _Stopped(Exception):
    """The consumer went away: the producer thread ends early."""


class _Handover(Generic[M]):
    """Batches from a worker thread to the loop, at most `_AHEAD` waiting."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ready: asyncio.Queue[list[M] | Exception | None] = asyncio.Queue()
        self.room = threading.Semaphore(_AHEAD)
        self.stop = threading.Event()

    def put(self, item: list[M] | Exception | None) -> None:
        """From the worker: wait for room (or the consumer's leaving), then hand over."""
        while not self.room.acquire(timeout=0.05):
            if self.stop.is_set():
                raise _Stopped
        self.loop.call_soon_threadsafe(self.ready.put_nowait, item)
        time.sleep(0)  # let the loop's thread have the interpreter now, not in 5 ms

    def produce(self, body: bytes, fmt: Format, cls: type[M], chunk: int) -> None:
        try:
            each_model_batch(body, fmt, cls, chunk, self.put)
            self.put(None)
        except _Stopped:
            return
        except Exception as exc:  # a DecodeError: raised in the consumer
            self.loop.call_soon_threadsafe(self.ready.put_nowait, exc)

    async def get(self) -> list[M] | None:
        item = await self.ready.get()
        self.room.release()
        if isinstance(item, Exception):
            raise item
        return item


async def iter_models(
    body: bytes, fmt: Format, cls: type[M], *, chunk: int = 100
) -> AsyncIterator[M]:
    """The models of a list document, yielded as a worker thread decodes them `chunk` at a
    time (at most `_AHEAD` chunks wait); leaving the loop early stops the thread."""
    if len(body) <= OFF_LOOP_BYTES:
        batches: list[list[M]] = []
        each_model_batch(body, fmt, cls, chunk, batches.append)
        for batch in batches:
            for model in batch:
                yield model
        return
    loop = asyncio.get_running_loop()
    pipe: _Handover[M] = _Handover(loop)
    # Not the decoding thread: a slow consumer must not hold up other responses.
    worker = loop.run_in_executor(
        own_pool("invoicing-iter", 4), pipe.produce, body, fmt, cls, chunk
    )
    try:
        while (handed := await pipe.get()) is not None:
            for model in handed:
                yield model
    finally:
        pipe.stop.set()
        await asyncio.shield(worker)
