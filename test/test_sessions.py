"""Per-trajectory sessions: ``Session`` storage and cleanup, ``SessionStore`` lifecycle."""

from __future__ import annotations

import asyncio
import logging

import pytest

from torchrl_agentic import Session, SessionStore


def close(session: Session) -> None:
    asyncio.run(session.aclose())


class TestSession:
    def test_get_set_contains(self):
        session = Session(3)
        assert "repl" not in session and len(session) == 0
        assert session.get("repl") is None and session.get("repl", "fallback") == "fallback"
        handle = object()
        assert session.set("repl", handle) is handle
        assert "repl" in session and session["repl"] is handle and session.get("repl") is handle
        assert len(session) == 1
        session.set("repl", 2)
        assert session["repl"] == 2 and len(session) == 1

    def test_getitem_missing_raises(self):
        with pytest.raises(KeyError, match="nothing"):
            Session(0)["nothing"]

    def test_pop(self):
        session = Session(0)
        session.set("a", 1)
        assert session.pop("a") == 1
        assert "a" not in session
        assert session.pop("a", "gone") == "gone"
        assert session.pop("a", None) is None
        with pytest.raises(KeyError, match="'a'"):
            session.pop("a")

    def test_pop_keeps_the_cleanup(self):
        released: list[str] = []
        session = Session(0)
        session.set("a", 1, cleanup=lambda: released.append("a"))
        session.pop("a")
        close(session)
        assert released == ["a"]

    def test_identity(self):
        session = Session(4, episode=2)
        assert (session.batch_index, session.episode, session.closed) == (4, 2, False)
        session.set("k", 1)
        assert repr(session) == "Session(batch_index=4, episode=2, keys=['k'], closed=False)"

    def test_cleanups_run_lifo(self):
        order: list[str] = []
        session = Session(0)
        session.set("first", 1, cleanup=lambda: order.append("first"))
        session.add_cleanup(lambda: order.append("second"))
        session.set("third", 3, cleanup=lambda: order.append("third"))
        close(session)
        assert order == ["third", "second", "first"]

    def test_async_and_sync_cleanups(self):
        order: list[str] = []
        session = Session(0)

        async def shut() -> None:
            await asyncio.sleep(0)
            order.append("async")

        session.add_cleanup(lambda: order.append("sync"))
        session.add_cleanup(shut)
        close(session)
        assert order == ["async", "sync"]

    def test_close_clears_values_and_marks_closed(self):
        session = Session(0)
        session.set("a", 1)
        close(session)
        assert session.closed and len(session) == 0 and "a" not in session

    def test_close_is_idempotent(self):
        calls: list[int] = []
        session = Session(0)
        session.add_cleanup(lambda: calls.append(1))
        close(session)
        close(session)
        assert calls == [1]

    def test_failing_cleanup_is_logged_and_the_others_still_run(self, caplog):
        order: list[str] = []
        session = Session(5)

        def broken() -> None:
            raise OSError("pipe already closed")

        async def broken_async() -> None:
            raise ValueError("async cleanup broke")

        session.add_cleanup(lambda: order.append("first"))
        session.add_cleanup(broken)
        session.add_cleanup(broken_async)
        session.add_cleanup(lambda: order.append("last"))
        with caplog.at_level(logging.WARNING, logger="torchrl_agentic.sessions"):
            close(session)
        assert order == ["last", "first"]
        assert session.closed
        failures = [r for r in caplog.records if r.name == "torchrl_agentic.sessions"]
        assert len(failures) == 2
        assert all(r.levelno == logging.WARNING for r in failures)
        assert all("of batch item 5 failed" in r.getMessage() for r in failures)
        assert {type(r.exc_info[1]) for r in failures if r.exc_info} == {OSError, ValueError}

    def test_set_after_close_raises(self):
        session = Session(2)
        close(session)
        with pytest.raises(RuntimeError, match=r"session of batch item 2 is closed; .*'late'"):
            session.set("late", 1)
        assert "late" not in session

    def test_add_cleanup_after_close_raises(self):
        session = Session(2)
        close(session)
        with pytest.raises(RuntimeError, match="closed"):
            session.add_cleanup(lambda: None)


class TestSessionStore:
    def test_get_creates_lazily_and_reuses(self):
        store = SessionStore()
        assert len(store) == 0 and store.active() == []
        session = store.get(3)
        assert isinstance(session, Session)
        assert (session.batch_index, session.episode) == (3, 0)
        assert store.get(3) is session
        assert store.active() == [3] and len(store) == 1
        store.get(1)
        assert store.active() == [1, 3]

    def test_release_closes_only_given_indices_and_bumps_episode(self):
        store = SessionStore()
        released: list[int] = []
        old = {}
        for index in range(3):
            old[index] = store.get(index)
            old[index].set("k", index, cleanup=lambda i=index: released.append(i))
        asyncio.run(store.release([0, 2]))
        assert sorted(released) == [0, 2]
        assert old[0].closed and old[2].closed and not old[1].closed
        assert store.active() == [1]
        fresh = store.get(0)
        assert fresh is not old[0] and fresh.episode == 1 and "k" not in fresh
        assert store.get(1) is old[1] and old[1].episode == 0

    def test_release_of_an_unused_index_still_starts_a_new_episode(self):
        store = SessionStore()
        asyncio.run(store.release([4]))
        assert store.active() == []
        assert store.get(4).episode == 1

    def test_episodes_count_up(self):
        store = SessionStore()
        for expected in range(3):
            assert store.get(0).episode == expected
            asyncio.run(store.release([0]))

    def test_release_all(self):
        store = SessionStore()
        sessions = [store.get(i) for i in (0, 5)]
        asyncio.run(store.release_all())
        assert len(store) == 0 and store.active() == []
        assert all(s.closed for s in sessions)
        assert store.get(5).episode == 1
