"""The event loop a ToolCompose owns: one thread, started lazily, that every step submits to."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An asyncio event loop running forever on a daemon thread.

    Submitting from any thread (including one that runs its own loop, such as Jupyter's) blocks the
    caller until the coroutine is done; loop-bound resources (subprocess pipes, HTTP sessions)
    stay valid from one submission to the next.

    Examples:
        >>> import asyncio
        >>> loop = LoopThread("demo")
        >>> async def add(a, b):
        ...     await asyncio.sleep(0)
        ...     return a + b
        >>> loop.run(add(1, 2))
        3
        >>> loop.close()
    """

    def __init__(self, name: str = "torchrl-agentic") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def running(self) -> bool:
        """True while the loop thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started on first access."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name} loop is closed; create a new object to run again")
            if self._loop is None:
                ready = threading.Event()
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._serve, args=(loop, ready), name=self.name, daemon=True
                )
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def in_loop_thread(self) -> bool:
        """True when called from the loop's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (its exception is re-raised here)."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(
                f"{self.name}: cannot wait on the loop from its own thread (a tool called env.step?)"
            )
        try:
            loop = self.loop
        except RuntimeError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self, final: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run ``final`` (if any), cancel what is left, stop the loop and join its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._closed = True
        if loop is None or thread is None:
            if final is not None:
                final.close()
            return
        try:
            if thread.is_alive():
                asyncio.run_coroutine_threadsafe(self._shutdown(final), loop).result()
        finally:
            if thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
            loop.close()

    @staticmethod
    async def _shutdown(final: Coroutine[Any, Any, Any] | None) -> None:
        try:
            if final is not None:
                await final
        finally:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            loop = asyncio.get_running_loop()
            await loop.shutdown_asyncgens()
            await loop.shutdown_default_executor()
