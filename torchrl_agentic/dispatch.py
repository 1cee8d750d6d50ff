"""The async engine: the per-call pipeline and the batch-wide gather.

Per call: lookup -> validate arguments -> rate-limit slot -> run (timeout) -> ToolResult. Every
failure the model caused becomes an error result for that call only; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from torchrl_agentic.errors import (
    InvalidArgumentsError,
    StopSignal,
    ToolCallLimitError,
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
    UnknownToolError,
)
from torchrl_agentic.schema import ArgsValidator, compile_validator
from torchrl_agentic.sessions import SessionStore
from torchrl_agentic.tool import Tool
from torchrl_agentic.types import (
    DispatchResult,
    MalformedCall,
    ParsedCall,
    ParseResult,
    ToolContext,
    ToolResult,
)

logger = logging.getLogger(__name__)

Outcome = tuple[ToolResult, bool]
"""A call's result and whether it asked to stop the trajectory."""


class Limiter(Protocol):
    """Anything that hands out slots: ``RateLimiter`` and its cluster-wide variants."""

    def slot(self) -> AbstractAsyncContextManager[Any]: ...


@dataclass(frozen=True)
class ItemWork:
    """One batch item's share of a step."""

    batch_index: int
    """Flat index of the item."""
    parsed: ParseResult
    """What the parser found in the item's newest message."""
    state: Any = None
    """The item's tensordict for tools that require state, or None."""


def normalise(value: Any) -> ToolResult:
    """Turn what a tool returned into a ``ToolResult`` (str -> text, other JSON -> JSON part)."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult.from_text(value)
    if value is None:
        return ToolResult.from_text("")
    return ToolResult.from_json(value)


class Dispatcher:
    """Runs the calls of a batch concurrently, one result per call site, in call order.

    Args:
        tools: the tools by name.
        rate_limits: a limiter per tool name (tools without one are not limited).
        per_call_timeout: seconds a call may take, rate-limiter wait included; None for no limit.
        validate_inputs: check arguments against each tool's ``input_schema`` before running it.
        max_calls_per_step: how many valid calls of one message run; later ones get an error result.
        sessions: the per-trajectory session store.
        clock: monotonic clock used for deadlines.
    """

    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        rate_limits: Mapping[str, Limiter] | None = None,
        per_call_timeout: float | None = None,
        validate_inputs: bool = True,
        max_calls_per_step: int | None = None,
        sessions: SessionStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tools = dict(tools)
        self.rate_limits = dict(rate_limits or {})
        self.per_call_timeout = per_call_timeout
        self.validate_inputs = validate_inputs
        self.max_calls_per_step = max_calls_per_step
        self.sessions = sessions if sessions is not None else SessionStore()
        self.clock = clock
        self._validators: dict[str, ArgsValidator] = {}

    def _validator(self, tool: Tool) -> ArgsValidator:
        validator = self._validators.get(tool.name)
        if validator is None:
            validator = self._validators[tool.name] = compile_validator(tool.input_schema)
        return validator

    async def run_batch(self, work: Sequence[ItemWork]) -> list[DispatchResult]:
        """Dispatch every item's calls at once; one ``DispatchResult`` per item, same order.

        Calls of messages without exclusive tools all go into one flat ``gather``; a message with
        an exclusive call is sequenced by :meth:`run_item` and joins the gather as one awaitable.
        """
        plans: list[list[Outcome | int] | int] = []
        awaitables: list[Awaitable[Any]] = []
        for item in work:
            plan, sequenced = self._plan(item)
            if sequenced:
                plans.append(len(awaitables))
                awaitables.append(self._run_sequenced(item, plan))
                continue
            item_slots: list[Outcome | int] = []
            for step in plan:
                if isinstance(step, ParsedCall):
                    item_slots.append(len(awaitables))
                    awaitables.append(self._run_call(step, item))
                else:
                    item_slots.append(step)
            plans.append(item_slots)
        done = await asyncio.gather(*awaitables) if awaitables else []
        results = []
        for item, slots in zip(work, plans):
            if isinstance(slots, int):
                results.append(done[slots])
            else:
                results.append(_assemble(item, [done[s] if isinstance(s, int) else s for s in slots]))
        return results

    async def run_item(self, item: ItemWork) -> DispatchResult:
        """Dispatch one message's calls (see :meth:`run_batch`)."""
        return (await self.run_batch([item]))[0]

    def _plan(self, item: ItemWork) -> tuple[list[Outcome | ParsedCall], bool]:
        """Per call site, a ready outcome or the call to run; and whether an exclusive call is among
        the calls to run."""
        plan: list[Outcome | ParsedCall] = []
        sequenced = False
        valid_seen = 0
        for site in item.parsed.ordered():
            if isinstance(site, MalformedCall):
                plan.append((ToolResult.error(site.message), False))
                continue
            valid_seen += 1
            if self.max_calls_per_step is not None and valid_seen > self.max_calls_per_step:
                error = ToolCallLimitError(site.tool, self.max_calls_per_step)
                plan.append((ToolResult.error(error.message), False))
                continue
            tool = self.tools.get(site.tool)
            sequenced = sequenced or (tool is not None and tool.exclusive)
            plan.append(site)
        return plan, sequenced

    async def _run_sequenced(
        self, item: ItemWork, plan: list[Outcome | ParsedCall]
    ) -> DispatchResult:
        """Run ``plan`` so that an exclusive call starts after every earlier call of the message has
        finished and before any later one starts; other calls overlap."""
        outcomes: list[Outcome | asyncio.Task[Outcome]] = []
        pending: list[asyncio.Task[Outcome]] = []
        for step in plan:
            if not isinstance(step, ParsedCall):
                outcomes.append(step)
                continue
            tool = self.tools.get(step.tool)
            if tool is not None and tool.exclusive:
                if pending:
                    await asyncio.wait(pending)
                    pending = []
                outcomes.append(await self._run_call(step, item))
                continue
            task = asyncio.ensure_future(self._run_call(step, item))
            outcomes.append(task)
            pending.append(task)
        if pending:
            await asyncio.wait(pending)
        return _assemble(item, [o.result() if isinstance(o, asyncio.Task) else o for o in outcomes])

    async def _run_call(self, call: ParsedCall, item: ItemWork) -> tuple[ToolResult, bool]:
        """One call through the whole pipeline; returns (result, stop_requested). Never raises."""
        tool = self.tools.get(call.tool)
        try:
            if tool is None:
                raise UnknownToolError(call.tool, sorted(self.tools))
            if self.validate_inputs:
                problem = self._validator(tool)(call.args)
                if problem is not None:
                    raise InvalidArgumentsError(tool.name, problem)
            timeout = self.per_call_timeout
            ctx = ToolContext(
                call_id=call.call_id,
                batch_index=item.batch_index,
                deadline=None if timeout is None else self.clock() + timeout,
                state=item.state if tool.wants_state else None,
                session=self.sessions.get(item.batch_index),
                tool=tool.name,
            )
            if timeout is None:
                return normalise(await self._limited(tool, call, ctx)), False
            deadline = asyncio.timeout(timeout)
            try:
                async with deadline:
                    return normalise(await self._limited(tool, call, ctx)), False
            except TimeoutError:
                if not deadline.expired():
                    raise  # the tool's own TimeoutError (e.g. its HTTP client), not our deadline
                raise ToolTimeoutError(tool.name, timeout) from None
        except StopSignal as signal:
            text = f"stopping: {signal.reason}" if signal.reason else "stopping"
            return ToolResult.from_text(text, meta={"stop_requested": True}), True
        except ToolError as error:
            meta = {"error": type(error).__name__, **error.detail}
            return ToolResult.error(error.message, meta=meta), False
        except Exception as exc:
            logger.debug("tool %r raised", call.tool, exc_info=True)
            failure = ToolExecutionError(call.tool, exc)
            return ToolResult.error(failure.message, meta={"error": failure.exc_type}), False

    async def _limited(self, tool: Tool, call: ParsedCall, ctx: ToolContext) -> Any:
        limiter = self.rate_limits.get(tool.name)
        if limiter is None:
            return await tool.run(call.args, ctx)
        async with limiter.slot():
            return await tool.run(call.args, ctx)


def _assemble(item: ItemWork, outcomes: Sequence[Outcome]) -> DispatchResult:
    results = tuple(result for result, _ in outcomes)
    return DispatchResult(
        cleaned_text=item.parsed.text,
        calls=tuple(item.parsed.ordered()),
        results=results,
        any_error=any(r.is_error for r in results),
        stop_requested=any(stop for _, stop in outcomes),
    )
