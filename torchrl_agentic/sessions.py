"""Per-trajectory sessions: where tools keep state and resources for one batch item's episode."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

Cleanup = Callable[[], "Awaitable[None] | None"]
_MISSING = object()


class Session:
    """A key-value store for one trajectory, with cleanup callbacks run when the trajectory ends.

    Tools are shared by every batch item; a tool keeps per-trajectory resources here (an
    interpreter, a scratch dir, a client) and registers how to release them.

    Examples:
        >>> import asyncio
        >>> session = Session(0)
        >>> released = []
        >>> session.set("repl", "handle", cleanup=lambda: released.append("repl"))
        >>> session.get("repl")
        'handle'
        >>> asyncio.run(session.aclose())
        >>> released
        ['repl']
    """

    def __init__(self, batch_index: int, episode: int = 0) -> None:
        self.batch_index = batch_index
        self.episode = episode
        self.closed = False
        self._values: dict[str, Any] = {}
        self._cleanups: list[Cleanup] = []

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        return self._values.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def set(self, key: str, value: Any, *, cleanup: Cleanup | None = None) -> Any:
        """Store ``value``; ``cleanup`` (sync or async) runs when the session closes. Returns ``value``."""
        if self.closed:
            raise RuntimeError(
                f"session of batch item {self.batch_index} is closed; it cannot take {key!r}"
            )
        self._values[key] = value
        if cleanup is not None:
            self._cleanups.append(cleanup)
        return value

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        """Remove and return the value under ``key`` (its cleanup still runs at close)."""
        if default is _MISSING:
            return self._values.pop(key)
        return self._values.pop(key, default)

    def add_cleanup(self, cleanup: Cleanup) -> None:
        """Run ``cleanup`` (sync or async) when the session closes, after later-added ones (LIFO)."""
        if self.closed:
            raise RuntimeError(
                f"session of batch item {self.batch_index} is closed; its cleanups have run, so "
                f"{cleanup!r} would never run: release the resource now instead"
            )
        self._cleanups.append(cleanup)

    async def aclose(self) -> None:
        """Run the cleanups in reverse order of registration; a failing cleanup is logged, not raised."""
        if self.closed:
            return
        self.closed = True
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                out = cleanup()
                if inspect.isawaitable(out):
                    await out
            except Exception:
                logger.warning(
                    "cleanup %r of batch item %d failed", cleanup, self.batch_index, exc_info=True
                )
        self._values.clear()

    def __repr__(self) -> str:
        return (
            f"Session(batch_index={self.batch_index}, episode={self.episode}, "
            f"keys={sorted(self._values)}, closed={self.closed})"
        )


class SessionStore:
    """The live sessions of a batch, keyed by flat batch index, created on first use."""

    def __init__(self) -> None:
        self._sessions: dict[int, Session] = {}
        self._episodes: dict[int, int] = {}

    def get(self, batch_index: int) -> Session:
        """The session of item ``batch_index``, created if the item has none yet."""
        session = self._sessions.get(batch_index)
        if session is None:
            episode = self._episodes.get(batch_index, 0)
            session = self._sessions[batch_index] = Session(batch_index, episode)
        return session

    def active(self) -> list[int]:
        """Indices of the items that currently hold a session."""
        return sorted(self._sessions)

    def __len__(self) -> int:
        return len(self._sessions)

    async def release(self, indices: Iterable[int]) -> None:
        """Close the sessions of ``indices``; their next use starts a new episode."""
        closing = []
        for index in indices:
            self._episodes[index] = self._episodes.get(index, 0) + 1
            session = self._sessions.pop(index, None)
            if session is not None:
                closing.append(session)
        for session in closing:
            await session.aclose()

    async def release_all(self) -> None:
        """Close every session."""
        await self.release(list(self._sessions))
