"""A long-lived event loop on its own thread, for the sync wrappers of async APIs.

An env's native methods are coroutines (sandbox and browser I/O is async). Its sync
methods must not call ``asyncio.run`` per call: each call would make and destroy a loop,
orphaning subprocesses and transports bound to it. Instead each env owns one
:class:`LoopThread` and submits every coroutine to it, so resources created in ``reset``
are still usable in ``step``. Running on a separate thread also makes the sync API work
from code that already runs an event loop (notebooks, async frameworks).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Runs coroutines to completion on one private event loop thread."""

    def __init__(self, name: str = "agentgym-loop"):
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop thread and return its result (or raise its error)."""
        self._start()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "A sync env method was called from inside the env's own event loop;"
                " await the async form (areset/astep/aclose) instead."
            )
        return self.submit(coro).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop thread and return at once (work that runs while the
        caller does something else, e.g. sandboxes set up during an optimizer step)."""
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def owns_running_loop(self) -> bool:
        """Whether the caller is running on this thread's loop (a hop would deadlock or
        only cost time: await the coroutine directly)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def stop(self) -> None:
        """Stop the loop and join the thread. Safe to call more than once."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout=10)
        if not loop.is_running():
            loop.close()
