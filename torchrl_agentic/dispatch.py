"""The async engine: the per-call pipeline and the batch-wide gather.

Per call: lookup -> validate arguments -> rate-limit slot -> run (timeout) -> ToolResult. Every
failure the model caused becomes an error result for that call only; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
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
        """Dispatch every item's calls at once; one ``DispatchResult`` per item, same order."""
        return list(await asyncio.gather(*(self.run_item(item) for item in work)))

    async def run_item(self, item: ItemWork) -> DispatchResult:
        """Dispatch one message's calls; exclusive tools run alone, in message order."""
        sites = item.parsed.ordered()
        if not sites:
            return DispatchResult(cleaned_text=item.parsed.text)
        outcomes: list[asyncio.Future[tuple[ToolResult, bool]] | None] = [None] * len(sites)
        pending: list[asyncio.Future[tuple[ToolResult, bool]]] = []
        valid_seen = 0
        for position, site in enumerate(sites):
            if isinstance(site, MalformedCall):
                outcomes[position] = _done(ToolResult.error(site.message))
                continue
            valid_seen += 1
            if self.max_calls_per_step is not None and valid_seen > self.max_calls_per_step:
                error = ToolCallLimitError(site.tool, self.max_calls_per_step)
                outcomes[position] = _done(ToolResult.error(error.message))
                continue
            tool = self.tools.get(site.tool)
            if tool is not None and tool.exclusive:
                if pending:
                    await asyncio.wait(pending)
                    pending = []
                outcome = _done(await self._run_call(site, item))
                outcomes[position] = outcome
                continue
            task = asyncio.ensure_future(self._run_call(site, item))
            outcomes[position] = task
            pending.append(task)
        if pending:
            await asyncio.wait(pending)
        results: list[ToolResult] = []
        stop = False
        for outcome in outcomes:
            if outcome is None:  # pragma: no cover - every position is filled above
                raise RuntimeError("internal error: a call site got no outcome")
            result, stopped = outcome.result()
            results.append(result)
            stop = stop or stopped
        return DispatchResult(
            cleaned_text=item.parsed.text,
            calls=tuple(sites),
            results=tuple(results),
            any_error=any(r.is_error for r in results),
            stop_requested=stop,
        )

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
                state=item.state if tool.requires_state else None,
                session=self.sessions.get(item.batch_index),
                tool=tool.name,
            )
            try:
                async with asyncio.timeout(timeout):
                    return normalise(await self._limited(tool, call, ctx)), False
            except TimeoutError:
                raise ToolTimeoutError(tool.name, timeout or 0.0) from None
        except StopSignal as signal:
            text = f"stopping: {signal.reason}" if signal.reason else "stopping"
            return ToolResult.from_text(text, meta={"stop_requested": True}), True
        except ToolError as error:
            return ToolResult.error(error.message), False
        except Exception as exc:  # noqa: BLE001 - any tool failure is data for the model
            logger.debug("tool %r raised", call.tool, exc_info=True)
            return ToolResult.error(ToolExecutionError(call.tool, exc).message), False

    async def _limited(self, tool: Tool, call: ParsedCall, ctx: ToolContext) -> Any:
        limiter = self.rate_limits.get(tool.name)
        if limiter is None:
            return await tool.run(call.args, ctx)
        async with limiter.slot():
            return await tool.run(call.args, ctx)


def _done(value: ToolResult | tuple[ToolResult, bool]) -> asyncio.Future[tuple[ToolResult, bool]]:
    future: asyncio.Future[tuple[ToolResult, bool]] = asyncio.get_running_loop().create_future()
    future.set_result(value if isinstance(value, tuple) else (value, False))
    return future
