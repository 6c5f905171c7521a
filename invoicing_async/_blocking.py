"""`BlockingInvoicingClient`: every operation of the async client as a blocking call.

Nothing here defines an operation: the blocking classes are derived from the async ones
(`InvoicingClient`, its resources, `with_raw_response`, stores), each coroutine method run
on the client's private event loop, each async iterator read as a plain iterator. A new
method or argument of the async client is therefore here as soon as it is there.

The loop runs in the calling thread while a call waits (no thread hop: a blocking call costs
what the awaited one does). A thread calling while another drives the loop hands its call to
that driver and takes the loop over when the driver leaves first, so threads share one
client's connections and budget concurrently. A thread that runs a loop of its own (a
notebook) has its call driven by a helper thread. After `os.fork()` the child builds its own
loop, client and stores on first use and leaves what it inherited alone.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from invoicing_async._client import InvoicingClient
from invoicing_async._resources.raw import RawOperations

if TYPE_CHECKING:
    from invoicing_async._sync.report import SyncReport
    from invoicing_async._sync.store import Store

__all__ = ["BlockingInvoicingClient"]

T = TypeVar("T")

#: Items an iterator takes from its async iterator per trip to the loop.
_ITER_CHUNK = 100
#: What a forked child inherited from its parent's clients: kept referenced, never closed
#: (closing a TLS connection or a SQLite handle in the child would close it under the parent).
_INHERITED: list[object] = []
_RUNTIMES: weakref.WeakSet[_Runtime] = weakref.WeakSet()
_OWN_LOOP = (
    "a BlockingInvoicingClient was called from inside its own event loop (from a callback "
    "such as on_request?): it would wait for itself; use the async client there"
)


class _Guest(Generic[T]):
    """A call handed to the thread driving the loop; its thread waits on `wake`."""

    __slots__ = ("finished", "future", "wake")

    def __init__(self, future: asyncio.Future[T]) -> None:
        self.future = future
        self.finished = False
        self.wake = threading.Event()


class _Runtime:
    """One blocking client's event loop, who drives it, and the async objects living on it.

    `generation` moves on in a forked child, whose proxies then rebuild their targets there:
    the parent's loop and objects are dropped unclosed (kept in `_INHERITED`)."""

    def __init__(self, factory: Callable[[], InvoicingClient]) -> None:
        self.factory = factory
        self.generation = 0
        self.closed = False
        self._reset()
        _RUNTIMES.add(self)

    def _reset(self) -> None:
        self._state = threading.Lock()  # guards the loop, the driver and the guests
        self._making = threading.Lock()  # one client made, however many threads ask at once
        self._loop: asyncio.AbstractEventLoop | None = None
        self._driver: int | None = None  # the thread running the loop now
        self._guests: dict[_Guest[Any], None] = {}
        self._helpers: ThreadPoolExecutor | None = None
        self._client: InvoicingClient | None = None
        self._owned: list[Any] = []  # stores opened through the client: closed with it

    def in_loop_thread(self) -> bool:
        return self._driver == threading.get_ident()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the client's loop and return its result in this thread."""
        if self.closed:
            coroutine.close()
            raise RuntimeError("this BlockingInvoicingClient is closed: create a new one")
        return self._call(coroutine)

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            if running is self._loop:
                coroutine.close()
                raise RuntimeError(_OWN_LOOP)
            # This thread runs a loop of its own (a notebook cell): a helper drives ours.
            return self._helper().submit(self._call, coroutine).result()
        me = threading.get_ident()
        with self._state:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.new_event_loop()
            if self._driver is None:
                self._driver = me
                guest = None
            else:
                guest = _Guest[T](loop.create_future())
                self._guests[guest] = None
                loop.call_soon_threadsafe(self._start_guest, loop, guest, coroutine)
        if guest is None:
            # The call stops the loop in the turn it ends (`run_until_complete` would take
            # one more turn of the loop to learn it, a tenth of a call's cost).
            return self._drive(loop, loop.create_task(_then_stop(coroutine, loop)), True)
        return self._wait(loop, guest)

    def _drive(
        self, loop: asyncio.AbstractEventLoop, until: asyncio.Future[T], stops_the_loop: bool
    ) -> T:
        """Run the loop in this thread until `until` is done (it stops the loop itself when
        `stops_the_loop`), then leave the loop to a guest."""
        try:
            while not until.done():  # (the loop stops early only if user code stops it)
                if stops_the_loop:
                    loop.run_forever()
                else:
                    loop.run_until_complete(until)
            return until.result()
        except BaseException:
            until.cancel()  # interrupted (Ctrl-C): the call stops with the next drive
            raise
        finally:
            with self._state:
                self._driver = None
                successor = next(iter(self._guests), None)
            if successor is not None:
                successor.wake.set()

    def _start_guest(
        self, loop: asyncio.AbstractEventLoop, guest: _Guest[T], coroutine: Coroutine[Any, Any, T]
    ) -> None:
        task = loop.create_task(coroutine)
        task.add_done_callback(functools.partial(self._guest_done, guest))

    def _guest_done(self, guest: _Guest[T], task: asyncio.Task[T]) -> None:
        if task.cancelled():
            guest.future.cancel()
        elif (error := task.exception()) is not None:
            guest.future.set_exception(error)
        else:
            guest.future.set_result(task.result())
        with self._state:
            guest.finished = True
            self._guests.pop(guest, None)
        guest.wake.set()

    def _wait(self, loop: asyncio.AbstractEventLoop, guest: _Guest[T]) -> T:
        """Wait for the driver to run `guest`; drive the loop when the driver left first."""
        me = threading.get_ident()
        while True:
            guest.wake.wait()
            with self._state:
                if guest.finished:
                    break
                guest.wake.clear()
                if self._driver is not None:
                    continue
                self._driver = me
            return self._drive(loop, guest.future, False)
        return guest.future.result()

    def _helper(self) -> ThreadPoolExecutor:
        with self._state:
            if self._helpers is None:
                self._helpers = ThreadPoolExecutor(thread_name_prefix="invoicing-blocking")
            return self._helpers

    def client(self) -> InvoicingClient:
        client = self._client
        if client is None:
            with self._making:
                if self._client is None:
                    self._client = self.run(_call(self.factory))
                client = self._client
        return client

    def own(self, factory: Callable[[], T]) -> T:
        """An object (a store) made on the loop by `factory`, closed with the client."""
        made = self.run(_call(factory))
        self._owned.append(made)
        return made

    def shutdown(self) -> None:
        """Close the stores and the client on the loop, then the loop and the helpers."""
        with self._state:
            if self.closed:
                return
            self.closed = True
            own_loop = self._driver == threading.get_ident()
        if own_loop:  # collected in a callback of the loop: closed once the driver leaves
            threading.Thread(target=self._finish, daemon=True).start()
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._finish()
        else:  # this thread runs a loop of its own: close ours from a thread of no loop
            closing = threading.Thread(target=self._finish)
            closing.start()
            closing.join()

    def _finish(self) -> None:
        with self._state:
            loop, objects = self._loop, [*self._owned, self._client]
            helpers, self._helpers = self._helpers, None
        if loop is not None:
            self._call(_close_all(objects, loop))
            with self._state:
                idle = self._driver is None and not self._guests
            if idle:
                loop.close()
        if helpers is not None:
            helpers.shutdown(wait=True)

    def after_fork(self) -> None:
        """In a forked child: forget the parent's loop and objects without closing them."""
        _INHERITED.append((self._loop, self._client, self._owned, self._helpers))
        self._reset()
        self.generation += 1


async def _then_stop(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> T:
    try:
        return await coroutine
    finally:
        loop.stop()


async def _close_all(objects: list[Any], loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the calls still running (their callers get `CancelledError`, never a hang),
    close `objects`, then the loop's async generators and default executor."""
    # A shared budget's connections were made on this loop, which closes: released first,
    # while their pool's own tasks run (its store opens new ones on next use, on any loop).
    for obj in objects:
        if isinstance(obj, InvoicingClient):
            await obj.budget.close()
    running = asyncio.all_tasks() - {asyncio.current_task()}
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    for obj in objects:
        if obj is not None:
            await (getattr(obj, "aclose", None) or obj.close)()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


async def _call(factory: Callable[[], T]) -> T:
    """`factory()` on the loop (what it makes may bind to the running loop)."""
    return factory()


def _after_fork_in_child() -> None:
    for runtime in list(_RUNTIMES):
        runtime.after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the proxies ---------------------------------------------------------------------------

#: How a proxy finds its async target again from the client: attribute reads and calls.
Step = tuple[str, str, tuple[Any, ...], dict[str, Any]]


class _Proxy:
    """The blocking face of one async object: its target is rebuilt from the client by
    `steps` (or by a factory, for a store) when the process changed."""

    __slots__ = ("__weakref__", "_cached", "_children", "_factory", "_root", "_rt", "_steps")

    _rt: _Runtime
    _root: object
    _steps: tuple[Step, ...]
    _factory: Callable[[], Any] | None
    _cached: tuple[int, Any] | None
    _children: dict[str, _Proxy]  # proxies of attributes read (`client.invoices`), kept

    def _target(self) -> Any:
        cached = self._cached
        rt = self._rt
        if cached is not None and cached[0] == rt.generation:
            return cached[1]
        generation = rt.generation
        if self._factory is not None:
            target = rt.own(self._factory)
        else:
            target = rt.client()
            for kind, name, args, kwargs in self._steps:
                target = getattr(target, name)
                if kind == "call":
                    target = target(*args, **kwargs)
        self._cached = (generation, target)
        return target

    def _derive(self, step: Step | None, target: Any, factory: Any = None) -> _Proxy:
        """The proxy of `target`, reached from this one's target by `step`."""
        proxy: _Proxy = object.__new__(blocking_type(type(target)))
        proxy._rt = self._rt
        proxy._root = self._root
        proxy._steps = self._steps + ((step,) if step else ())
        proxy._factory = factory if factory is not None else self._factory
        proxy._cached = (self._rt.generation, target)
        proxy._children = {}
        return proxy

    def _runs_on(self, method: Callable[..., Any]) -> Callable[..., Any]:
        runtime = self._rt

        @functools.wraps(method)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return runtime.run(method(*args, **kwargs))

        return blocking

    def __dir__(self) -> list[str]:
        return sorted(set(dir(type(self))) | {n for n in dir(self._target()) if n[:1] != "_"})

    def __getattr__(self, name: str) -> Any:
        """Members known only on the instance (the operations of `with_raw_response`)."""
        if name.startswith("_"):
            raise AttributeError(name)
        child = self._children.get(name)
        if child is not None:
            return child
        value = getattr(self._target(), name)
        if inspect.iscoroutinefunction(value):
            return self._runs_on(value)
        if not _is_async_api(value):
            return value
        child = self._children[name] = self._derive(("get", name, (), {}), value)
        return child

    def __repr__(self) -> str:
        cached = self._cached
        return f"<blocking {'(not started)' if cached is None else repr(cached[1])}>"


def _is_async_api(value: object) -> bool:
    return isinstance(value, (InvoicingClient, RawOperations)) or bool(_async_members(type(value)))


def _wrapped(parent: _Proxy, step: Step, value: Any) -> Any:
    return parent._derive(step, value) if _is_async_api(value) else value  # noqa: SLF001


_ASYNC_MEMBERS: dict[type, tuple[str, ...]] = {}


def _async_members(cls: type) -> tuple[str, ...]:
    """The public coroutine and async-generator methods of `cls` (`__aenter__` included)."""
    found = _ASYNC_MEMBERS.get(cls)
    if found is None:
        found = _ASYNC_MEMBERS[cls] = tuple(
            name
            for name, member in inspect.getmembers(cls)
            if (not name.startswith("_") or name in ("__aenter__", "__aexit__"))
            and (inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member))
        )
    return found


def _operation(name: str, member: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(member) or _returns_async_iterator(member):

        @functools.wraps(member)
        def iterate(self: _Proxy, *args: Any, **kwargs: Any) -> Iterator[Any]:
            return _iterate(self._rt, getattr(self._target(), name)(*args, **kwargs))

        signature = inspect.signature(member)
        returns = str(signature.return_annotation).replace("AsyncIterator", "Iterator")
        iterate.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
        return iterate

    @functools.wraps(member)
    def blocking(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        target = self._target()
        result = self._rt.run(getattr(target, name)(*args, **kwargs))
        return self if result is target else result  # (`__aenter__` returns its target)

    return blocking


def _returns_async_iterator(member: Callable[..., Any]) -> bool:
    """A plain method annotated to return an async iterator (a protocol's `iter_invoices`)."""
    try:
        returns = str(inspect.signature(member).return_annotation)
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return "AsyncIterator" in returns and not inspect.iscoroutinefunction(member)


def _plain(name: str, member: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(member)
    def call(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._target(), name)(*args, **kwargs)
        return _wrapped(self, ("call", name, args, kwargs), result)

    return call


def _attribute(name: str, doc: str | None) -> property:
    def read(self: _Proxy) -> Any:
        return _wrapped(self, ("get", name, (), {}), getattr(self._target(), name))

    return property(read, doc=doc)


#: Blocking names of the async special methods.
_RENAMED = {"__aenter__": "__enter__", "__aexit__": "__exit__", "aclose": "close"}


def _members_of(cls: type, skip: set[str]) -> dict[str, Any]:
    """The blocking members derived from the public members of `cls`."""
    members: dict[str, Any] = {}
    for name, member in inspect.getmembers(cls):
        public = not name.startswith("_") or name in _RENAMED
        blocking_name = _RENAMED.get(name, name)
        if not public or blocking_name in skip:
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, (classmethod, staticmethod)):
            continue  # constructors (`from_env`): the blocking client makes its own
        if isinstance(static, property) or not callable(member):
            members[blocking_name] = _attribute(name, getattr(static, "__doc__", None))
        elif name in _async_members(cls) or _returns_async_iterator(member):
            members[blocking_name] = _operation(name, member)
        else:
            members[blocking_name] = _plain(name, member)
    return members


_TYPES: dict[type, type[_Proxy]] = {}


def blocking_type(cls: type) -> type[_Proxy]:
    """The blocking class of the async class `cls`, derived from its members."""
    if issubclass(cls, InvoicingClient):
        return BlockingInvoicingClient
    made = _TYPES.get(cls)
    if made is None:
        members = _members_of(cls, set())
        members["__slots__"] = ()
        members["__doc__"] = f"`{cls.__name__}` with every operation blocking (derived from it)."
        made = _TYPES[cls] = type(f"Blocking{cls.__name__}", (_Proxy,), members)
    return made


def _iterate(runtime: _Runtime, source: AsyncIterator[Any]) -> Iterator[Any]:
    """`source` read as a plain iterator, up to `_ITER_CHUNK` items a trip to the loop."""
    try:
        while True:
            chunk, more = runtime.run(_take(source, _ITER_CHUNK))
            yield from chunk
            if not more:
                return
    finally:
        close = getattr(source, "aclose", None)
        if close is not None and not runtime.closed:
            runtime.run(close())


async def _take(source: AsyncIterator[T], count: int) -> tuple[list[T], bool]:
    items: list[T] = []
    try:
        while len(items) < count:
            items.append(await anext(source))
    except StopAsyncIteration:
        return items, False
    return items, True


# -- the client -------------------------------------------------------------------------------


class BlockingInvoicingClient(_Proxy):
    """`InvoicingClient` for code that is not async (Django views, Celery tasks, scripts):
    the same arguments, resources and errors, every method blocking.

    Calls run on the client's own event loop in one daemon thread, so they work from any
    thread (share one client between threads), inside a running loop (a notebook), and in a
    child after `os.fork()` (it gets a loop and connections of its own on first use).
    `with` or `close()` ends it; a client collected without either is closed quietly."""

    __slots__ = ("_finalizer",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._setup(functools.partial(InvoicingClient, *args, **kwargs))

    __init__.__signature__ = inspect.signature(InvoicingClient.__init__)  # type: ignore[attr-defined]

    @classmethod
    def from_env(cls, *args: Any, **kwargs: Any) -> BlockingInvoicingClient:
        """As `InvoicingClient.from_env`, blocking."""
        client = object.__new__(cls)
        client._setup(functools.partial(InvoicingClient.from_env, *args, **kwargs))
        return client

    def _setup(self, factory: Callable[[], InvoicingClient]) -> None:
        self._rt = _Runtime(factory)
        self._root = self
        self._steps = ()
        self._factory = None
        self._cached = None
        self._children = {}
        self._finalizer = weakref.finalize(self, self._rt.shutdown)

    def close(self) -> None:
        """Close the session, the stores opened through `store()`, and stop the loop."""
        if self._rt.in_loop_thread():
            raise RuntimeError("close() called from the client's own event loop thread")
        self._rt.shutdown()

    def __enter__(self) -> BlockingInvoicingClient:
        self._rt.run(self._target().__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def store(self, factory: Callable[[], Store]) -> Any:
        """A store made by `factory` on this client's loop, with every method blocking
        (``client.store(lambda: SQLiteStore(path)).get(42)``); closed with the client, made
        anew in a forked child."""
        return self._derive(None, self._rt.own(factory), factory=factory)

    def sync(self, store: Any, **options: Any) -> SyncReport:
        """One `SyncEngine` run of `store` (a `store()` or a store): ``client.sync(store)``;
        `options` are the engine's (`concurrency=`, `dry_run=`...)."""
        target = store._target() if isinstance(store, _Proxy) else store  # noqa: SLF001
        return self._rt.run(_sync_run(self._target(), target, options))


async def _sync_run(client: InvoicingClient, store: Store, options: dict[str, Any]) -> SyncReport:
    from invoicing_async._sync.engine import SyncEngine

    return await SyncEngine(client, store, **options).run()


BlockingInvoicingClient.from_env.__func__.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    InvoicingClient.from_env.__func__  # type: ignore[attr-defined]
)
for _name, _member in _members_of(InvoicingClient, set(vars(BlockingInvoicingClient))).items():
    setattr(BlockingInvoicingClient, _name, _member)
del _name, _member
