"""A FIFO limiter combining a concurrency cap and a token bucket, safe to share across event loops.

Waiters queue in arrival order and park on a future of their own loop; nothing polls. A release
grants the head waiter directly, and a head that only lacks a token is woken by a single timer set
for the moment its token is due. One limiter can serve several threads, each running its own loop:
state sits behind a ``threading.Lock`` (never held across an ``await``) and a grant made on another
thread reaches the waiter through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

_QUEUED, _GRANTED, _DROPPED = 0, 1, 2
_EPS = 1e-9  # float slack so a timer that fires exactly on time finds its token


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():  # a waiter cancelled after its grant hands the grant back itself
        fut.set_result(None)


class _Waiter:
    __slots__ = ("fut", "loop", "since", "state")

    def __init__(self, fut: asyncio.Future[None], since: float) -> None:
        self.fut = fut
        self.loop = fut.get_loop()
        self.since = since
        self.state = _QUEUED


class RateLimiter:
    """Caps concurrent holders and paces acquisitions with a token bucket; FIFO, no polling.

    Acquiring a slot waits until a concurrency slot is free and a token is available, then takes
    both. Leaving the slot (normally, by exception or by cancellation) frees the concurrency slot;
    tokens are spent for good. Waiters are served strictly first come, first served, so a newcomer
    never overtakes a queued caller. A caller cancelled while queued, or after its grant but before
    it resumed, leaves no slot or token behind: the grant passes to the next waiter.

    The limiter is not bound to a loop: create it anywhere and share it between threads that each
    run their own asyncio loop.

    Args:
        max_concurrent: most slots held at once; None for no concurrency cap.
        rate_per_second: tokens added to the bucket per second; None for no rate limit.
        burst: bucket capacity, i.e. how many acquisitions may happen back to back after a quiet
            spell. Defaults to 1 (strict pacing). Only valid with ``rate_per_second``.
        name: label shown in ``repr`` and ``stats()``.
        clock: monotonic time source in seconds used for token refill and wait times (tests inject
            a fake one). Defaults to ``time.monotonic``.

    Examples:
        >>> import asyncio
        >>> limiter = RateLimiter(max_concurrent=2, rate_per_second=1000.0, burst=4, name="search")
        >>> async def call(i: int) -> int:
        ...     async with limiter.slot():
        ...         return i * 2
        >>> async def main() -> list[int]:
        ...     return list(await asyncio.gather(*(call(i) for i in range(4))))
        >>> asyncio.run(main())
        [0, 2, 4, 6]
        >>> limiter.total_acquired, limiter.in_flight
        (4, 0)
    """

    def __init__(
        self,
        *,
        max_concurrent: int | None = None,
        rate_per_second: float | None = None,
        burst: int | None = None,
        name: str = "",
        clock: Callable[[], float] | None = None,
    ) -> None:
        _check_int("max_concurrent", max_concurrent, "use None for no concurrency cap")
        _check_rate(rate_per_second)
        if burst is not None and rate_per_second is None:
            raise ValueError(
                f"burst only applies to a rate limit, got burst={burst!r} with "
                "rate_per_second=None; set rate_per_second or drop burst"
            )
        _check_int("burst", burst, "use None for the default burst of 1")
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__} {name!r}")
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning seconds, got {clock!r}")
        self.name = name
        self.max_concurrent = max_concurrent
        self.rate_per_second = None if rate_per_second is None else float(rate_per_second)
        self.burst = None if rate_per_second is None else (1 if burst is None else burst)
        self._clock: Callable[[], float] = time.monotonic if clock is None else clock
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()
        self._in_flight = 0
        self._tokens = float(self.burst or 0)
        self._refilled_at = self._clock()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_owner: _Waiter | None = None  # head waiter a timer/wakeup is pending for
        self._total_wait = 0.0
        self._total_acquired = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Holds one slot for the body of ``async with limiter.slot():``."""
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    @property
    def in_flight(self) -> int:
        """Slots currently held (granted and not yet released)."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Callers currently queued."""
        return len(self._waiters)

    @property
    def total_wait_time(self) -> float:
        """Seconds (by ``clock``) that callers spent queued, summed over all callers."""
        return self._total_wait

    @property
    def total_acquired(self) -> int:
        """Slots handed out so far (grants returned by cancelled callers not counted)."""
        return self._total_acquired

    def stats(self) -> dict[str, Any]:
        """Returns a consistent snapshot of the four counters above, keyed by property name."""
        with self._lock:
            return {
                "in_flight": self._in_flight,
                "waiting": len(self._waiters),
                "total_wait_time": self._total_wait,
                "total_acquired": self._total_acquired,
            }

    def __repr__(self) -> str:
        limits = f"max_concurrent={self.max_concurrent}, rate_per_second={self.rate_per_second}"
        counts = ", ".join(f"{k}={v}" for k, v in self.stats().items())
        return f"RateLimiter(name={self.name!r}, {limits}, burst={self.burst}, {counts})"

    async def _acquire(self) -> None:
        with self._lock:
            now = self._clock()
            self._refill(now)
            if not self._waiters and self._has_capacity():  # fast path: no future, no yield
                self._take()
                return
            waiter = _Waiter(asyncio.get_running_loop().create_future(), now)
            self._waiters.append(waiter)
            self._dispatch()
        try:
            await waiter.fut
        except BaseException:
            with self._lock:
                if waiter.state == _GRANTED:  # granted, but cancelled before resuming: give back
                    self._give_back()
                elif waiter.state == _QUEUED:
                    self._unqueue(waiter, self._clock(), waiter.loop)
                self._dispatch()
            raise

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._dispatch()

    # Everything below runs with self._lock held.

    def _refill(self, now: float) -> None:
        if self.rate_per_second is not None and self.burst is not None:
            gained = (now - self._refilled_at) * self.rate_per_second
            self._tokens = min(float(self.burst), self._tokens + max(gained, 0.0))
        self._refilled_at = now

    def _slot_free(self) -> bool:
        return self.max_concurrent is None or self._in_flight < self.max_concurrent

    def _has_capacity(self) -> bool:
        return self._slot_free() and (self.rate_per_second is None or self._tokens >= 1.0 - _EPS)

    def _take(self) -> None:
        self._in_flight += 1
        if self.rate_per_second is not None:
            self._tokens -= 1.0
        self._total_acquired += 1

    def _give_back(self) -> None:
        self._in_flight -= 1
        if self.burst is not None:
            self._tokens = min(float(self.burst), self._tokens + 1.0)
        self._total_acquired -= 1

    def _dispatch(self) -> None:
        """Grants queued waiters in order while capacity lasts; arms the refill wakeup if needed."""
        now = self._clock()
        self._refill(now)
        here = _running_loop()
        while self._waiters:
            head = self._waiters[0]
            if head.fut.cancelled():  # its task will raise at the await; nothing to grant
                self._unqueue(head, now, here)
                continue
            if not self._has_capacity():
                if not self._slot_free() or self._timer_owner is head:
                    break  # a missing slot is handed over by the next release
                if self._arm(head, here):  # only a token is missing: wake when it is due
                    break
                self._unqueue(head, now, here)  # its loop is closed: it can never resume
                continue
            self._take()
            head.state = _GRANTED
            self._unqueue(head, now, here)
            if here is head.loop:
                _resolve(head.fut)
            elif not _call_soon_threadsafe(head.loop, _resolve, head.fut):
                self._give_back()  # the waiter's loop is closed: it can never resume

    def _unqueue(self, w: _Waiter, now: float, here: asyncio.AbstractEventLoop | None) -> None:
        self._waiters.remove(w)  # O(1) for the head, which is the usual case
        if w.state == _QUEUED:
            w.state = _DROPPED
        self._total_wait += now - w.since
        if self._timer_owner is w:
            self._disarm(here)

    def _arm(self, head: _Waiter, here: asyncio.AbstractEventLoop | None) -> bool:
        # The timer lives on the head's own loop, which stays alive while the head waits. From
        # another thread we first hop onto that loop; _on_timer then arms the real timer there.
        self._disarm(here)
        if here is head.loop:
            delay = (1.0 - self._tokens) / (self.rate_per_second or 1.0)
            self._timer = head.loop.call_later(delay, self._on_timer, head)
        elif not _call_soon_threadsafe(head.loop, self._on_timer, head):
            return False
        self._timer_owner = head
        return True

    def _disarm(self, here: asyncio.AbstractEventLoop | None) -> None:
        owner, timer = self._timer_owner, self._timer
        if timer is not None and owner is not None and here is owner.loop:
            timer.cancel()  # a timer on another loop cannot be cancelled safely; it fires stale
        self._timer_owner = self._timer = None

    def _on_timer(self, head: _Waiter) -> None:
        with self._lock:
            if self._timer_owner is not head:
                return  # stale: the waiter it was set for was granted or left
            self._timer_owner = self._timer = None
            self._dispatch()


def _call_soon_threadsafe(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> bool:
    """Schedules ``fn(*args)`` on ``loop`` from any thread; False when the loop is closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


def _check_int(name: str, value: object, fix: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}; {fix}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}; {fix}")


def _check_rate(rate: object) -> None:
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))):
        raise TypeError(
            f"rate_per_second must be a number > 0, got {type(rate).__name__} {rate!r}; "
            "pass a float such as 20.0, or None for no rate limit"
        )
    if isinstance(rate, (int, float)) and not (math.isfinite(rate) and rate > 0):
        raise ValueError(
            f"rate_per_second must be a finite number > 0, got {rate!r}; use None for no rate limit"
        )
