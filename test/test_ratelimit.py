"""Tests for torchrl_agentic.ratelimit."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from torchrl_agentic.ratelimit import RateLimiter


class FakeClock:
    """A clock that only moves when told to, and counts how often it is read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


async def _enter(limiter: RateLimiter, log: list[str] | None = None, tag: str = "") -> None:
    async with limiter.slot():
        if log is not None:
            log.append(tag)


async def _gather(*coros: Any) -> None:
    """Runs coroutines together; a lost wakeup fails the test after 5 s instead of hanging it."""
    await asyncio.wait_for(asyncio.gather(*coros), 5.0)


async def _drain(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _run_in_threads(targets: list[Callable[[], None]], timeout: float = 10.0) -> None:
    """Runs each target in its own thread; a thread that raises leaves the test's counts short."""
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if any(thread.is_alive() for thread in threads):
        pytest.fail("a thread is still waiting on the limiter: a cross-thread wakeup was lost")


class TestRateLimiter:
    def test_concurrency_cap_never_exceeded(self) -> None:
        limiter = RateLimiter(max_concurrent=5)
        current = peak = 0

        async def worker(i: int) -> None:
            nonlocal current, peak
            async with limiter.slot():
                current += 1
                peak = max(peak, current)
                await asyncio.sleep(0.001 * (i % 3))
                current -= 1

        async def main() -> None:
            await _gather(*(worker(i) for i in range(50)))

        asyncio.run(main())
        assert peak == 5
        assert (limiter.in_flight, limiter.waiting, limiter.total_acquired) == (0, 0, 50)

    def test_fifo_order_with_cap_of_one(self) -> None:
        limiter = RateLimiter(max_concurrent=1)
        arrivals: list[int] = []
        entries: list[int] = []

        async def worker(i: int) -> None:
            await asyncio.sleep(0.001 * (i * 7 % 10))  # arrive in an order unlike creation order
            arrivals.append(i)
            async with limiter.slot():
                entries.append(i)
                await asyncio.sleep(0.005)  # hold long enough for a queue to form

        async def main() -> None:
            await _gather(*(worker(i) for i in range(10)))

        asyncio.run(main())
        assert arrivals != sorted(arrivals)
        assert entries == arrivals

    def test_newcomer_does_not_overtake_queued_waiter(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(rate_per_second=1.0, clock=clock)
        log: list[str] = []

        async def main() -> None:
            await _enter(limiter, log, "first")  # spends the only token
            queued = asyncio.create_task(_enter(limiter, log, "queued"))
            await asyncio.sleep(0)
            assert limiter.waiting == 1
            clock.now += 1.0  # a token is due; the queued waiter's timer has not fired yet
            newcomer = asyncio.create_task(_enter(limiter, log, "newcomer"))
            await asyncio.wait_for(queued, 1.0)
            assert log == ["first", "queued"]
            assert limiter.waiting == 1 and not newcomer.done()
            await _drain(newcomer)

        asyncio.run(main())

    def test_token_bucket_paces_acquisitions(self) -> None:
        limiter = RateLimiter(rate_per_second=20.0, burst=1)

        async def main() -> float:
            start = time.monotonic()
            await _gather(*(_enter(limiter) for _ in range(5)))
            return time.monotonic() - start

        elapsed = asyncio.run(main())
        assert 0.15 <= elapsed < 1.5  # 1 immediate + 4 tokens at 20/s = 0.2 s
        assert limiter.total_acquired == 5

    @pytest.mark.parametrize(("burst", "immediate"), [(None, 1), (3, 3)])
    def test_burst_allows_immediate_acquisitions(self, burst: int | None, immediate: int) -> None:
        clock = FakeClock()  # frozen: no token is ever refilled
        limiter = RateLimiter(rate_per_second=1.0, burst=burst, clock=clock)

        async def main() -> None:
            for _ in range(immediate):
                await asyncio.wait_for(_enter(limiter), 1.0)
            assert limiter.total_wait_time == 0.0
            extra = asyncio.create_task(_enter(limiter))
            await asyncio.sleep(0.01)
            assert limiter.waiting == 1 and not extra.done()
            await _drain(extra)

        asyncio.run(main())
        assert (limiter.total_acquired, limiter.waiting) == (immediate, 0)

    def test_cancelled_queued_waiter_frees_nothing(self) -> None:
        limiter = RateLimiter(max_concurrent=1)
        log: list[str] = []

        async def main() -> None:
            holder = limiter.slot()
            await holder.__aenter__()
            tasks = [asyncio.create_task(_enter(limiter, log, tag)) for tag in "abc"]
            await asyncio.sleep(0)
            assert limiter.waiting == 3
            tasks[1].cancel()
            await asyncio.sleep(0)
            assert (limiter.waiting, limiter.in_flight) == (2, 1)  # no slot went to "b"
            await holder.__aexit__(None, None, None)
            await asyncio.wait_for(asyncio.gather(tasks[0], tasks[2]), 1.0)
            assert tasks[1].cancelled()

        asyncio.run(main())
        assert log == ["a", "c"]
        assert (limiter.in_flight, limiter.waiting, limiter.total_acquired) == (0, 0, 3)

    def test_cancelled_queued_waiter_leaks_no_token(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(rate_per_second=1.0, clock=clock)

        async def main() -> None:
            await _enter(limiter)
            queued = asyncio.create_task(_enter(limiter))
            await asyncio.sleep(0)
            await _drain(queued)
            clock.now += 1.0
            await asyncio.wait_for(_enter(limiter), 1.0)  # the refilled token is still there

        asyncio.run(main())
        assert (limiter.total_acquired, limiter.waiting) == (2, 0)

    @pytest.mark.parametrize("how", ["asyncio.timeout", "asyncio.wait_for"])
    def test_timeout_while_queued_leaks_nothing(self, how: str) -> None:
        limiter = RateLimiter(max_concurrent=1)

        async def bounded() -> None:
            if how == "asyncio.timeout":  # what a per-call timeout wraps around the slot
                async with asyncio.timeout(0.02):
                    await _enter(limiter)
            else:
                await asyncio.wait_for(_enter(limiter), 0.02)

        async def main() -> None:
            holder = limiter.slot()
            await holder.__aenter__()
            with pytest.raises(TimeoutError):
                await bounded()
            assert (limiter.waiting, limiter.in_flight) == (0, 1)
            await holder.__aexit__(None, None, None)
            await asyncio.wait_for(_enter(limiter), 1.0)

        asyncio.run(main())
        assert (limiter.in_flight, limiter.total_acquired) == (0, 2)

    def test_cancellation_after_grant_hands_slot_on(self) -> None:
        limiter = RateLimiter(max_concurrent=1)
        log: list[str] = []

        async def main() -> None:
            holder = limiter.slot()
            await holder.__aenter__()
            granted = asyncio.create_task(_enter(limiter, log, "granted"))
            following = asyncio.create_task(_enter(limiter, log, "following"))
            await asyncio.sleep(0)
            await holder.__aexit__(None, None, None)  # grants the slot to "granted"...
            assert (limiter.waiting, limiter.in_flight) == (1, 1)
            granted.cancel()  # ...which is cancelled before it resumes
            await asyncio.wait_for(following, 1.0)
            with pytest.raises(asyncio.CancelledError):
                await granted

        asyncio.run(main())
        assert log == ["following"]
        assert (limiter.in_flight, limiter.waiting, limiter.total_acquired) == (0, 0, 2)

    def test_cancellation_after_grant_returns_token(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(rate_per_second=1.0, clock=clock)
        log: list[str] = []

        async def main() -> None:
            await _enter(limiter)
            granted = asyncio.create_task(_enter(limiter, log, "granted"))
            await asyncio.sleep(0)
            clock.now += 1.0
            following = asyncio.create_task(_enter(limiter, log, "following"))
            await asyncio.sleep(0)  # its arrival grants the due token to "granted"...
            assert (limiter.waiting, limiter.in_flight) == (1, 1)
            granted.cancel()  # ...which hands it back: the frozen clock refills nothing more
            await asyncio.wait_for(following, 1.0)

        asyncio.run(main())
        assert log == ["following"]
        assert (limiter.total_acquired, limiter.in_flight) == (2, 0)

    def test_exception_inside_slot_releases_it(self) -> None:
        limiter = RateLimiter(max_concurrent=1)

        async def main() -> None:
            with pytest.raises(KeyError, match="boom"):
                async with limiter.slot():
                    raise KeyError("boom")
            assert limiter.in_flight == 0
            await asyncio.wait_for(_enter(limiter), 1.0)

        asyncio.run(main())
        assert limiter.total_acquired == 2

    def test_stats_report_contention(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(max_concurrent=1, clock=clock)

        async def main() -> None:
            holder = limiter.slot()
            await holder.__aenter__()
            waiter = asyncio.create_task(_enter(limiter))
            await asyncio.sleep(0)
            assert limiter.stats() == {
                "in_flight": 1,
                "waiting": 1,
                "total_wait_time": 0.0,
                "total_acquired": 1,
            }
            clock.now += 2.5
            await holder.__aexit__(None, None, None)
            await waiter

        asyncio.run(main())
        assert limiter.stats() == {
            "in_flight": 0,
            "waiting": 0,
            "total_wait_time": 2.5,
            "total_acquired": 2,
        }
        assert (limiter.in_flight, limiter.waiting) == (0, 0)
        assert (limiter.total_wait_time, limiter.total_acquired) == (2.5, 2)

    def test_unlimited_still_counts(self) -> None:
        limiter = RateLimiter()
        current = peak = 0

        async def worker() -> None:
            nonlocal current, peak
            async with limiter.slot():
                current += 1
                peak = max(peak, current)
                await asyncio.sleep(0.001)
                current -= 1

        async def main() -> None:
            await _gather(*(worker() for _ in range(10)))

        asyncio.run(main())
        assert peak == 10
        assert limiter.stats() == {
            "in_flight": 0,
            "waiting": 0,
            "total_wait_time": 0.0,
            "total_acquired": 10,
        }

    def test_uncontended_acquire_does_not_yield(self) -> None:
        limiter = RateLimiter(max_concurrent=1, rate_per_second=1.0)
        slot = limiter.slot()
        enter = slot.__aenter__()  # driven by hand, with no event loop at all
        with pytest.raises(StopIteration):
            enter.send(None)
        assert limiter.in_flight == 1
        with pytest.raises(StopIteration):
            slot.__aexit__(None, None, None).send(None)
        assert limiter.in_flight == 0

    def test_refill_wait_uses_one_timer_and_never_polls(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        clock = FakeClock()
        limiter = RateLimiter(rate_per_second=0.1, clock=clock)  # one token every 10 s
        timers: list[tuple[float, asyncio.TimerHandle, Callable[..., Any], tuple[Any, ...]]] = []

        async def main() -> None:
            loop = asyncio.get_running_loop()
            real_call_later = loop.call_later

            def spy(delay: float, callback: Callable[..., Any], *args: Any) -> Any:
                handle = real_call_later(delay, callback, *args)
                if getattr(callback, "__self__", None) is limiter:
                    timers.append((delay, handle, callback, args))
                return handle

            monkeypatch.setattr(loop, "call_later", spy)
            await _enter(limiter)
            clock.now += 4.0  # 0.4 of the next token has accrued
            waiter = asyncio.create_task(_enter(limiter))
            await asyncio.sleep(0)
            reads = clock.reads
            await asyncio.sleep(0.05)  # a poller would look at the clock meanwhile
            assert clock.reads == reads and not waiter.done()
            assert [t[0] for t in timers] == [pytest.approx(6.0)]
            _, handle, callback, args = timers[0]
            clock.now += 6.0
            handle.cancel()
            callback(*args)  # the timer fires: the token is due
            await asyncio.wait_for(waiter, 1.0)
            assert len(timers) == 1

        asyncio.run(main())
        assert limiter.total_acquired == 2

    def test_shared_across_threads_with_own_loops(self) -> None:
        limiter = RateLimiter(max_concurrent=2)  # created outside any event loop
        lock = threading.Lock()
        state = {"current": 0, "peak": 0, "done": 0}

        async def worker() -> None:
            async with limiter.slot():
                with lock:
                    state["current"] += 1
                    state["peak"] = max(state["peak"], state["current"])
                await asyncio.sleep(0.002)
                with lock:
                    state["current"] -= 1
                    state["done"] += 1

        async def main() -> None:
            await _gather(*(worker() for _ in range(20)))

        _run_in_threads([lambda: asyncio.run(main()), lambda: asyncio.run(main())])
        assert state["peak"] <= 2 and state["done"] == 40
        assert (limiter.in_flight, limiter.waiting, limiter.total_acquired) == (0, 0, 40)

    def test_shared_rate_limit_across_threads(self) -> None:
        limiter = RateLimiter(rate_per_second=50.0)

        async def main(n: int) -> None:
            await _gather(*(_enter(limiter) for _ in range(n)))

        start = time.monotonic()
        # The 2-call loop finishes (and closes) while the other still waits on refill timers.
        _run_in_threads([lambda: asyncio.run(main(2)), lambda: asyncio.run(main(8))])
        elapsed = time.monotonic() - start
        assert 0.12 <= elapsed < 5.0  # 1 immediate + 9 tokens at 50/s = 0.18 s
        assert (limiter.total_acquired, limiter.waiting) == (10, 0)

    def test_usable_from_successive_event_loops(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(rate_per_second=1.0, clock=clock)

        async def first() -> None:
            await _enter(limiter)
            pending = asyncio.create_task(_enter(limiter))  # still queued when the loop closes
            await asyncio.sleep(0)
            assert limiter.waiting == 1 and not pending.done()

        asyncio.run(first())
        assert (limiter.waiting, limiter.in_flight) == (0, 0)
        clock.now += 1.0
        asyncio.run(asyncio.wait_for(_enter(limiter), 1.0))
        assert limiter.total_acquired == 2

    def test_repr_shows_limits_and_stats(self) -> None:
        limiter = RateLimiter(max_concurrent=4, rate_per_second=20, name="search")
        slot = limiter.slot()
        with pytest.raises(StopIteration):  # uncontended: completes without a loop
            slot.__aenter__().send(None)
        text = repr(limiter)
        for part in (
            "name='search'",
            "max_concurrent=4",
            "rate_per_second=20.0",
            "burst=1",
            "in_flight=1",
            "waiting=0",
            "total_acquired=1",
        ):
            assert part in text
        with pytest.raises(StopIteration):
            slot.__aexit__(None, None, None).send(None)

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            (
                {"max_concurrent": 0},
                ValueError,
                r"max_concurrent must be an int >= 1, got 0; use None for no concurrency cap",
            ),
            ({"max_concurrent": 2.0}, TypeError, r"max_concurrent must be an int >= 1, got float"),
            ({"max_concurrent": True}, TypeError, r"max_concurrent must be an int >= 1, got bool"),
            ({"rate_per_second": 0}, ValueError, r"rate_per_second must be a finite number > 0"),
            ({"rate_per_second": -1.0}, ValueError, r"> 0, got -1.0; use None for no rate limit"),
            ({"rate_per_second": float("inf")}, ValueError, r"finite number > 0, got inf"),
            ({"rate_per_second": float("nan")}, ValueError, r"finite number > 0, got nan"),
            (
                {"rate_per_second": "20"},
                TypeError,
                r"rate_per_second must be a number > 0, got str",
            ),
            ({"rate_per_second": 1.0, "burst": 0}, ValueError, r"burst must be an int >= 1, got 0"),
            ({"rate_per_second": 1.0, "burst": 2.5}, TypeError, r"burst must be an int >= 1"),
            ({"burst": 3}, ValueError, r"burst only applies to a rate limit.*set rate_per_second"),
            ({"name": 3}, TypeError, r"name must be a str, got int"),
            ({"clock": 5}, TypeError, r"clock must be a callable"),
        ],
    )
    def test_construction_errors(
        self, kwargs: dict[str, Any], error: type[Exception], match: str
    ) -> None:
        with pytest.raises(error, match=match):
            RateLimiter(**kwargs)
