"""``LoopThread``: the event loop a ToolCompose owns, on its own thread, started lazily."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator

import pytest

from torchrl_agentic.loop import LoopThread

# a broken close() or run() hangs rather than fails: turn a hang into a failure
pytestmark = pytest.mark.timeout(30)


def threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


@pytest.fixture
def loop_thread(request) -> Iterator[LoopThread]:
    loop = LoopThread(f"test-loop-{request.node.name}")
    yield loop
    loop.close()


class TestRun:
    def test_returns_the_result(self, loop_thread):
        async def add(a: int, b: int) -> int:
            await asyncio.sleep(0)
            return a + b

        assert loop_thread.run(add(2, 3)) == 5

    def test_reraises_the_exception(self, loop_thread):
        async def fail() -> None:
            raise ValueError("tool exploded")

        with pytest.raises(ValueError, match="tool exploded"):
            loop_thread.run(fail())
        assert loop_thread.run(asyncio.sleep(0, result="still usable")) == "still usable"

    def test_runs_on_its_own_thread_and_keeps_one_loop(self, loop_thread):
        async def where() -> tuple[threading.Thread, asyncio.AbstractEventLoop]:
            return threading.current_thread(), asyncio.get_running_loop()

        first = loop_thread.run(where())
        second = loop_thread.run(where())
        assert first == second
        assert first[0] is not threading.current_thread()
        assert first[0].name == loop_thread.name and first[1] is loop_thread.loop

    def test_lazy_start(self, loop_thread):
        assert not loop_thread.running
        assert threads_named(loop_thread.name) == []
        loop_thread.run(asyncio.sleep(0))
        assert loop_thread.running
        assert len(threads_named(loop_thread.name)) == 1

    def test_works_from_inside_a_running_loop(self, loop_thread):
        async def inner() -> asyncio.AbstractEventLoop:
            await asyncio.sleep(0)
            return asyncio.get_running_loop()

        async def main() -> tuple[asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
            # run() blocks this coroutine's thread; fine here, nothing else runs on this loop
            return asyncio.get_running_loop(), loop_thread.run(inner())

        outer, used = asyncio.run(main())
        assert used is loop_thread.loop and used is not outer

    def test_from_the_loop_thread_raises(self, loop_thread):
        inner_state: list[str] = []

        async def inner() -> None:  # pragma: no cover - never awaited
            pass

        async def reentrant() -> None:
            coro = inner()
            try:
                loop_thread.run(coro)
            finally:
                inner_state.append(inspect.getcoroutinestate(coro))

        with pytest.raises(RuntimeError, match="cannot wait on the loop from its own thread"):
            loop_thread.run(reentrant())
        assert inner_state == [inspect.CORO_CLOSED]
        assert loop_thread.in_loop_thread() is False


class TestClose:
    def test_joins_the_thread(self):
        loop = LoopThread("test-loop-join")
        loop.run(asyncio.sleep(0))
        (thread,) = threads_named("test-loop-join")
        loop.close()
        assert not thread.is_alive() and not loop.running

    def test_cancels_pending_tasks(self):
        loop = LoopThread("test-loop-cancel")
        seen: list[str] = []
        started = threading.Event()

        async def forever() -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        async def spawn() -> asyncio.Task[None]:
            return asyncio.ensure_future(forever())

        task = loop.run(spawn())
        assert started.wait(5)
        loop.close()
        assert seen == ["cancelled"] and task.cancelled()

    def test_runs_final_before_cancelling(self):
        loop = LoopThread("test-loop-final")
        order: list[str] = []

        async def forever() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                order.append("cancelled")
                raise

        async def spawn() -> asyncio.Task[None]:
            task = asyncio.ensure_future(forever())
            await asyncio.sleep(0)
            return task

        async def final() -> None:
            await asyncio.sleep(0)
            order.append(f"final on {threading.current_thread().name}")

        task = loop.run(spawn())
        loop.close(final())
        assert order == ["final on test-loop-final", "cancelled"]
        assert task.cancelled()

    def test_close_before_start_closes_final_without_starting(self):
        loop = LoopThread("test-loop-never")

        async def final() -> None:  # pragma: no cover - never awaited
            pass

        coro = final()
        loop.close(coro)
        assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
        assert threads_named("test-loop-never") == [] and not loop.running

    def test_close_is_idempotent(self):
        loop = LoopThread("test-loop-twice")
        loop.run(asyncio.sleep(0))
        loop.close()
        loop.close()
        assert not loop.running

    def test_run_after_close_raises(self):
        loop = LoopThread("test-loop-closed")
        loop.run(asyncio.sleep(0))
        loop.close()
        coro = asyncio.sleep(0)
        try:
            with pytest.raises(RuntimeError, match="test-loop-closed loop is closed"):
                loop.run(coro)
        finally:
            coro.close()
        assert threads_named("test-loop-closed") == []

    def test_run_after_close_before_start_raises(self):
        loop = LoopThread("test-loop-closed-early")
        loop.close()
        coro = asyncio.sleep(0)
        try:
            with pytest.raises(RuntimeError, match="loop is closed; create a new object"):
                loop.run(coro)
        finally:
            coro.close()
        assert threads_named("test-loop-closed-early") == []

    def test_run_after_close_closes_the_coroutine(self):
        loop = LoopThread("test-loop-closed-coro")
        loop.close()
        coro = asyncio.sleep(0)
        try:
            with pytest.raises(RuntimeError, match="loop is closed"):
                loop.run(coro)
            assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
        finally:
            coro.close()

    def test_close_stops_the_thread_even_when_final_raises(self):
        loop = LoopThread("test-loop-final-raises")
        loop.run(asyncio.sleep(0))

        async def final() -> None:
            raise OSError("teardown failed")

        try:
            with pytest.raises(OSError, match="teardown failed"):
                loop.close(final())
            assert not loop.running
        finally:
            # leave no thread behind whatever close() did
            if loop._loop is not None and loop._thread is not None and loop._thread.is_alive():
                loop._loop.call_soon_threadsafe(loop._loop.stop)
                loop._thread.join(5)
