"""The async engine alone: ``Dispatcher`` and ``ItemWork`` driven by ``asyncio.run``, no env."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from torchrl_agentic import (
    ImagePart,
    JSONPart,
    MalformedCall,
    ParsedCall,
    ParseResult,
    RateLimiter,
    Session,
    StopTool,
    TextPart,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
)
from torchrl_agentic.dispatch import Dispatcher, ItemWork, normalise
from torchrl_agentic.errors import ToolExecutionError
from torchrl_agentic.sessions import SessionStore
from torchrl_agentic.testing import EchoTool, RaisingTool, SleepTool

Site = ParsedCall | MalformedCall


def call(tool: str, index: int, **args: Any) -> ParsedCall:
    return ParsedCall(tool, args, f"call_{index}", index=index)


def bad(index: int, message: str = "could not decode the call") -> MalformedCall:
    return MalformedCall(message, f"call_{index}", index=index)


def item(*sites: Site, batch_index: int = 0, text: str = "", state: Any = None) -> ItemWork:
    calls = tuple(s for s in sites if isinstance(s, ParsedCall))
    errors = tuple(s for s in sites if isinstance(s, MalformedCall))
    return ItemWork(batch_index, ParseResult(text=text, calls=calls, errors=errors), state)


def dispatch(dispatcher: Dispatcher, *work: ItemWork) -> list[Any]:
    return asyncio.run(dispatcher.run_batch(list(work)))


def texts(result: Any) -> list[str]:
    return [r.text for r in result.results]


class Recorder(Tool):
    """Sleeps ``args["seconds"]`` and logs ``("start"|"end", tag)`` in a log shared by the test."""

    description = "Record start and end."
    input_schema = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "tag": {"type": "string"}},
        "required": ["tag"],
    }

    def __init__(self, name: str, log: list[tuple[str, str]], *, exclusive: bool = False) -> None:
        self.name = name
        self.log = log
        self.exclusive = exclusive

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.log.append(("start", args["tag"]))
        await asyncio.sleep(float(args.get("seconds", 0.0)))
        self.log.append(("end", args["tag"]))
        return ToolResult.from_text(args["tag"])


class Hang(Tool):
    """Waits forever; records whether it was cancelled."""

    name = "hang"
    description = "Never answers."
    input_schema = {"type": "object"}

    def __init__(self) -> None:
        self.started = False
        self.cancelled = False

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.started = True
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ToolResult.from_text("unreachable")


class ArgsSpy(Tool):
    """Records the arguments it was given; wants an integer ``n``."""

    name = "spy"
    description = "Record the arguments."
    input_schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }

    def __init__(self) -> None:
        self.seen: list[Mapping[str, Any]] = []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.seen.append(args)
        return ToolResult.from_text(f"n={args['n']!r}")


class Returns(Tool):
    """Returns ``args["value"]`` unchanged, to exercise normalisation."""

    name = "returns"
    description = "Return the value."
    input_schema = {"type": "object"}

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> Any:
        return args.get("value")


def position(log: Sequence[tuple[str, str]], event: str, tag: str) -> int:
    return log.index((event, tag))


class TestItemWork:
    def test_defaults_and_frozen(self):
        work = ItemWork(3, ParseResult(text="hi"))
        assert work.batch_index == 3 and work.state is None and work.parsed.text == "hi"
        with pytest.raises(AttributeError, match="batch_index"):
            work.batch_index = 4  # type: ignore[misc]


class TestOrdering:
    def test_results_in_call_order_whatever_the_completion_order(self):
        log: list[tuple[str, str]] = []
        dispatcher = Dispatcher({"rec": Recorder("rec", log)})
        seconds = {"a": 0.06, "b": 0.0, "c": 0.03}
        sites = [call("rec", i, tag=tag, seconds=s) for i, (tag, s) in enumerate(seconds.items())]
        (result,) = dispatch(dispatcher, item(*sites))
        ends = [tag for event, tag in log if event == "end"]
        assert ends == ["b", "c", "a"]  # completion order differs from call order...
        assert texts(result) == ["a", "b", "c"]  # ...results do not
        assert result.call_ids == ("call_0", "call_1", "call_2")

    def test_malformed_sites_keep_their_message_position(self):
        dispatcher = Dispatcher({"echo": EchoTool()})
        sites = [call("echo", 0, text="x"), bad(1, "no JSON object"), call("echo", 2, text="y")]
        (result,) = dispatch(dispatcher, item(*sites, text="cleaned"))
        assert result.cleaned_text == "cleaned"
        assert result.call_ids == ("call_0", "call_1", "call_2")
        assert [type(c) for c in result.calls] == [ParsedCall, MalformedCall, ParsedCall]
        assert texts(result) == ["x", "no JSON object", "y"]
        assert [r.is_error for r in result.results] == [False, True, False]
        assert result.any_error and not result.stop_requested

    def test_every_call_site_gets_exactly_one_result(self):
        echo = EchoTool()
        dispatcher = Dispatcher({"echo": echo, "boom": RaisingTool(ValueError("x"))})
        sites = [
            bad(0),
            call("echo", 1, text="fine"),
            call("nope", 2),
            call("echo", 3),  # missing required argument
            call("boom", 4),
            bad(5),
            call("echo", 6, text="also fine"),
        ]
        (result,) = dispatch(dispatcher, item(*sites))
        assert len(result.calls) == len(result.results) == len(sites)
        assert result.call_ids == tuple(f"call_{i}" for i in range(len(sites)))
        assert [r.is_error for r in result.results] == [True, False, True, True, True, True, False]
        assert [c.call_id for c in echo.contexts] == ["call_1", "call_6"]

    def test_message_without_calls_gives_empty_result(self):
        dispatcher = Dispatcher({"echo": EchoTool()})
        (result,) = dispatch(dispatcher, item(text="just talking"))
        assert result.cleaned_text == "just talking"
        assert result.calls == () and result.results == ()
        assert not result.any_error and not result.stop_requested


class TestConcurrency:
    def test_calls_of_one_message_overlap(self):
        sleep = SleepTool(seconds=0.05)
        dispatcher = Dispatcher({"sleep": sleep})
        (result,) = dispatch(dispatcher, item(*(call("sleep", i) for i in range(3))))
        assert sleep.max_in_flight == 3
        assert not result.any_error

    def test_run_batch_overlaps_items_and_keeps_item_order(self):
        log: list[tuple[str, str]] = []
        sleep = SleepTool(seconds=0.05)
        dispatcher = Dispatcher({"sleep": sleep, "rec": Recorder("rec", log)})
        # item 0 is the slowest: it finishes last but its result comes first
        work = [
            item(call("rec", 0, tag=f"item{b}", seconds=0.06 - 0.02 * b), batch_index=b)
            for b in range(3)
        ] + [item(call("sleep", 0), batch_index=3), item(call("sleep", 0), batch_index=4)]
        results = dispatch(dispatcher, *work)
        assert [texts(r) for r in results[:3]] == [["item0"], ["item1"], ["item2"]]
        starts = [position(log, "start", f"item{b}") for b in range(3)]
        assert max(starts) < min(position(log, "end", f"item{b}") for b in range(3))
        assert sleep.max_in_flight == 2
        assert sorted(b for b, _ in sleep.calls) == [3, 4]


class TestLookup:
    def test_unknown_tool_error_lists_available_tools(self):
        dispatcher = Dispatcher({"sleep": SleepTool(), "echo": EchoTool()})
        (result,) = dispatch(dispatcher, item(call("serach", 0, q="x")))
        (outcome,) = result.results
        assert outcome.is_error and result.any_error
        assert outcome.text == "unknown tool 'serach'; available tools: echo, sleep"

    def test_unknown_tool_with_no_tools(self):
        (result,) = dispatch(Dispatcher({}), item(call("x", 0)))
        assert result.results[0].text == "unknown tool 'x'; available tools: (none)"


class TestValidation:
    def test_invalid_arguments_are_an_error_and_the_tool_does_not_run(self):
        spy = ArgsSpy()
        dispatcher = Dispatcher({"spy": spy})
        (result,) = dispatch(dispatcher, item(call("spy", 0, n="three"), call("spy", 1)))
        assert [r.is_error for r in result.results] == [True, True]
        assert texts(result) == [
            "invalid arguments for tool 'spy': 'three' is not of type 'integer' (at n)",
            "invalid arguments for tool 'spy': 'n' is a required property",
        ]
        assert spy.seen == []

    def test_valid_arguments_run(self):
        spy = ArgsSpy()
        (result,) = dispatch(Dispatcher({"spy": spy}), item(call("spy", 0, n=3)))
        assert texts(result) == ["n=3"] and not result.any_error
        assert spy.seen == [{"n": 3}]

    def test_validate_inputs_false_lets_bad_arguments_through(self):
        spy = ArgsSpy()
        dispatcher = Dispatcher({"spy": spy}, validate_inputs=False)
        (result,) = dispatch(dispatcher, item(call("spy", 0, n="three")))
        assert spy.seen == [{"n": "three"}]
        assert texts(result) == ["n='three'"] and not result.any_error


class TestToolFailures:
    def test_tool_error_message_passes_through(self):
        dispatcher = Dispatcher({"boom": RaisingTool(ToolError("n must be below 10, try n=9"))})
        (result,) = dispatch(dispatcher, item(call("boom", 0)))
        assert result.results[0].is_error
        assert texts(result) == ["n must be below 10, try n=9"]

    def test_generic_exception_shows_type_and_message_only(self):
        dispatcher = Dispatcher({"boom": RaisingTool(KeyError("missing"))})
        (result,) = dispatch(dispatcher, item(call("boom", 0)))
        (text,) = texts(result)
        assert text == "tool 'boom' failed: KeyError: 'missing'"
        assert "Traceback" not in text and "File " not in text
        assert result.results[0].is_error

    def test_exception_without_message_shows_type(self):
        dispatcher = Dispatcher({"boom": RaisingTool(RuntimeError())})
        (result,) = dispatch(dispatcher, item(call("boom", 0)))
        assert texts(result) == ["tool 'boom' failed: RuntimeError"]

    def test_failure_is_isolated_to_its_call_and_item(self):
        dispatcher = Dispatcher({"boom": RaisingTool(ValueError("bad")), "echo": EchoTool()})
        first, second = dispatch(
            dispatcher,
            item(call("echo", 0, text="a"), call("boom", 1), call("echo", 2, text="b")),
            item(call("echo", 0, text="c"), batch_index=1),
        )
        assert texts(first) == ["a", "tool 'boom' failed: ValueError: bad", "b"]
        assert first.any_error and not second.any_error
        assert texts(second) == ["c"]

    def test_tool_raising_timeout_error_without_a_deadline_is_a_tool_failure(self):
        dispatcher = Dispatcher({"boom": RaisingTool(TimeoutError("upstream took too long"))})
        (result,) = dispatch(dispatcher, item(call("boom", 0)))
        assert texts(result) == ["tool 'boom' failed: TimeoutError: upstream took too long"]

    def test_tool_raising_timeout_error_before_its_deadline_is_a_tool_failure(self):
        dispatcher = Dispatcher(
            {"boom": RaisingTool(TimeoutError("upstream took too long"))}, per_call_timeout=30
        )
        (result,) = dispatch(dispatcher, item(call("boom", 0)))
        assert texts(result) == ["tool 'boom' failed: TimeoutError: upstream took too long"]


class TestStop:
    def test_stop_signal_sets_stop_requested_without_error(self):
        dispatcher = Dispatcher({"stop": StopTool(), "echo": EchoTool()})
        stopped, other = dispatch(
            dispatcher,
            item(call("echo", 0, text="x"), call("stop", 1, reason="task complete")),
            item(call("echo", 0, text="y"), batch_index=1),
        )
        assert stopped.stop_requested and not stopped.any_error
        outcome = stopped.results[1]
        assert not outcome.is_error
        assert outcome.text == "stopping: task complete"
        assert outcome.meta["stop_requested"] is True
        assert not other.stop_requested

    def test_stop_without_reason(self):
        (result,) = dispatch(Dispatcher({"stop": StopTool()}), item(call("stop", 0)))
        assert result.stop_requested and texts(result) == ["stopping"]


class TestTimeout:
    def test_timeout_cancels_the_tool(self):
        hang = Hang()
        dispatcher = Dispatcher({"hang": hang, "echo": EchoTool()}, per_call_timeout=0.05)
        start = time.monotonic()
        (result,) = dispatch(dispatcher, item(call("hang", 0), call("echo", 1, text="quick")))
        assert time.monotonic() - start < 5.0
        assert hang.started and hang.cancelled
        assert result.results[0].is_error
        assert texts(result) == ["tool 'hang' timed out after 0.05 s and was cancelled", "quick"]

    def test_timeout_counts_rate_limiter_wait(self):
        echo = EchoTool()
        limiter = RateLimiter(max_concurrent=1)
        dispatcher = Dispatcher(
            {"echo": echo}, rate_limits={"echo": limiter}, per_call_timeout=0.05
        )

        async def main() -> Any:
            async with limiter.slot():  # someone else holds the only slot
                return await dispatcher.run_item(item(call("echo", 0, text="x")))

        result = asyncio.run(main())
        assert echo.contexts == []  # never got a slot, never ran
        assert texts(result) == ["tool 'echo' timed out after 0.05 s and was cancelled"]
        assert limiter.in_flight == 0

    def test_limited_call_runs_when_a_slot_frees_in_time(self):
        echo = EchoTool()
        limiter = RateLimiter(max_concurrent=1)
        dispatcher = Dispatcher({"echo": echo}, rate_limits={"echo": limiter}, per_call_timeout=5)
        sites = [call("echo", i, text=str(i)) for i in range(3)]
        (result,) = dispatch(dispatcher, item(*sites))
        assert texts(result) == ["0", "1", "2"]
        assert limiter.total_acquired == 3


class TestMaxCallsPerStep:
    def test_only_valid_calls_count_and_extra_ones_get_an_error(self):
        echo = EchoTool()
        dispatcher = Dispatcher({"echo": echo}, max_calls_per_step=2)
        sites = [
            bad(0),
            call("echo", 1, text="a"),
            bad(2),
            call("echo", 3, text="b"),
            call("echo", 4, text="c"),
            call("echo", 5, text="d"),
        ]
        (result,) = dispatch(dispatcher, item(*sites))
        limit = "call to 'echo' not run: at most 2 tool call(s) per step are allowed"
        assert texts(result)[1] == "a" and texts(result)[3] == "b"
        assert texts(result)[4:] == [limit, limit]
        assert [r.is_error for r in result.results] == [True, False, True, False, True, True]
        assert [c.call_id for c in echo.contexts] == ["call_1", "call_3"]

    def test_limit_is_per_message_not_per_batch(self):
        echo = EchoTool()
        dispatcher = Dispatcher({"echo": echo}, max_calls_per_step=2)
        work = [
            item(*(call("echo", i, text=f"{b}{i}") for i in range(2)), batch_index=b)
            for b in range(3)
        ]
        results = dispatch(dispatcher, *work)
        assert not any(r.any_error for r in results)
        assert len(echo.contexts) == 6


class TestExclusive:
    def test_exclusive_call_runs_alone_within_its_message(self):
        log: list[tuple[str, str]] = []
        shared = Recorder("rec", log)
        alone = Recorder("alone", log, exclusive=True)
        dispatcher = Dispatcher({"rec": shared, "alone": alone})
        sites = [
            call("rec", 0, tag="a", seconds=0.04),
            call("rec", 1, tag="b", seconds=0.01),
            call("alone", 2, tag="X", seconds=0.02),
            call("rec", 3, tag="c", seconds=0.02),
            call("rec", 4, tag="d", seconds=0.01),
        ]
        (result,) = dispatch(dispatcher, item(*sites))
        assert texts(result) == ["a", "b", "X", "c", "d"]
        start_x, end_x = position(log, "start", "X"), position(log, "end", "X")
        assert start_x > position(log, "end", "a") and start_x > position(log, "end", "b")
        assert position(log, "start", "c") > end_x and position(log, "start", "d") > end_x
        # the non-exclusive neighbours still overlap each other
        assert position(log, "start", "b") < position(log, "end", "a")
        assert position(log, "start", "d") < position(log, "end", "c")

    def test_consecutive_exclusive_calls_do_not_overlap(self):
        log: list[tuple[str, str]] = []
        dispatcher = Dispatcher({"alone": Recorder("alone", log, exclusive=True)})
        sites = [call("alone", i, tag=t, seconds=0.01) for i, t in enumerate("XY")]
        dispatch(dispatcher, item(*sites))
        assert log == [("start", "X"), ("end", "X"), ("start", "Y"), ("end", "Y")]

    def test_exclusive_does_not_serialise_other_items(self):
        log: list[tuple[str, str]] = []
        dispatcher = Dispatcher(
            {"rec": Recorder("rec", log), "alone": Recorder("alone", log, exclusive=True)}
        )
        dispatch(
            dispatcher,
            item(call("alone", 0, tag="X", seconds=0.05)),
            item(call("rec", 0, tag="other", seconds=0.0), batch_index=1),
        )
        assert position(log, "start", "other") < position(log, "end", "X")

    def test_non_exclusive_calls_overlap(self):
        log: list[tuple[str, str]] = []
        dispatcher = Dispatcher({"rec": Recorder("rec", log)})
        sites = [call("rec", i, tag=t, seconds=0.01) for i, t in enumerate("abc")]
        dispatch(dispatcher, item(*sites))
        assert [event for event, _ in log[:3]] == ["start", "start", "start"]


class TestNormalise:
    @pytest.mark.parametrize(
        ("value", "parts", "text"),
        [
            ("hello", (TextPart("hello"),), "hello"),
            (None, (TextPart(""),), ""),
            ({"a": 1}, (JSONPart({"a": 1}),), '{"a": 1}'),
            ([1, "x"], (JSONPart([1, "x"]),), '[1, "x"]'),
            (7, (JSONPart(7),), "7"),
        ],
    )
    def test_values_become_results(self, value, parts, text):
        result = normalise(value)
        assert result.parts == parts and result.text == text and not result.is_error

    def test_tool_result_passes_through_unchanged(self):
        value = ToolResult((ImagePart("abc"),), is_error=True, meta={"k": 1})
        assert normalise(value) is value

    @pytest.mark.parametrize("value", ["text", None, {"a": [1, 2]}, [1, 2], 3.5])
    def test_dispatcher_normalises_what_tools_return(self, value):
        dispatcher = Dispatcher({"returns": Returns()})
        (result,) = dispatch(dispatcher, item(call("returns", 0, value=value)))
        assert result.results[0] == normalise(value)
        if not isinstance(value, str) and value is not None:
            assert json.loads(result.results[0].text) == value


class TestToolContext:
    def test_context_fields(self):
        echo = EchoTool()
        dispatcher = Dispatcher({"echo": echo})
        dispatch(dispatcher, item(call("echo", 4, text="x"), batch_index=7))
        (ctx,) = echo.contexts
        assert ctx.call_id == "call_4" and ctx.batch_index == 7 and ctx.tool == "echo"

    def test_deadline_set_only_with_a_timeout(self):
        with_timeout, without = EchoTool(), EchoTool()
        dispatch(
            Dispatcher({"echo": with_timeout}, per_call_timeout=2.5, clock=lambda: 100.0),
            item(call("echo", 0, text="x")),
        )
        dispatch(
            Dispatcher({"echo": without}, clock=lambda: 100.0), item(call("echo", 0, text="x"))
        )
        assert with_timeout.contexts[0].deadline == pytest.approx(102.5)
        assert with_timeout.contexts[0].time_left(101.0) == pytest.approx(1.5)
        assert without.contexts[0].deadline is None
        assert without.contexts[0].time_left(101.0) is None

    def test_session_is_the_items_session(self):
        echo = EchoTool()
        sessions = SessionStore()
        dispatcher = Dispatcher({"echo": echo}, sessions=sessions)
        dispatch(
            dispatcher,
            item(call("echo", 0, text="a"), call("echo", 1, text="b"), batch_index=2),
            item(call("echo", 0, text="c"), batch_index=5),
        )
        by_item: dict[int, list[Session | None]] = {}
        for ctx in echo.contexts:
            by_item.setdefault(ctx.batch_index, []).append(ctx.session)
        assert by_item[2] == [sessions.get(2)] * 2
        assert by_item[5] == [sessions.get(5)]
        assert sessions.get(2) is not sessions.get(5)
        assert sessions.get(2).batch_index == 2
        assert dispatcher.sessions is sessions

    def test_state_only_for_tools_that_require_it(self):
        wants, ignores = EchoTool("wants", wants_state=True), EchoTool("ignores")
        state = object()
        dispatcher = Dispatcher({"wants": wants, "ignores": ignores})
        dispatch(
            dispatcher,
            item(call("wants", 0, text="a"), call("ignores", 1, text="b"), state=state),
        )
        assert wants.contexts[0].state is state
        assert ignores.contexts[0].state is None




class TestErrorDetails:
    def test_huge_exception_messages_are_cut(self):
        message = ToolExecutionError("t", ValueError("x" * 10_000)).message
        assert len(message) < 2_200 and message.endswith("... [8000 more characters]")

    def test_error_results_name_the_error_type_in_meta(self):
        dispatcher = Dispatcher({"boom": RaisingTool(KeyError("k")), "echo": EchoTool()})
        (result,) = dispatch(dispatcher, item(call("boom", 0), call("nope", 1), call("echo", 2, text="hi")))
        assert [r.meta.get("error") for r in result.results] == ["KeyError", "UnknownToolError", None]
        assert result.results[1].meta["tool"] == "nope"
