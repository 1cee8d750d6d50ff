"""Fakes for tests (ours and yours): tools with observable behaviour and a scripted policy."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tensordict import TensorDictBase

from torchrl_agentic.tool import Tool
from torchrl_agentic.types import ToolContext, ToolResult


class SleepTool(Tool):
    """Sleeps ``seconds`` (or ``args["seconds"]``) and reports it; tracks peak concurrency.

    Args:
        name: the tool's name.
        seconds: default sleep per call.
    """

    description = "Sleep for a while, then answer."
    input_schema = {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0}, "tag": {"type": "string"}},
    }

    def __init__(self, name: str = "sleep", seconds: float = 0.05) -> None:
        self.name = name
        self.seconds = seconds
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls: list[tuple[int, str]] = []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.calls.append((ctx.batch_index, ctx.call_id))
        try:
            seconds = float(args.get("seconds", self.seconds))
            await asyncio.sleep(seconds)
        finally:
            self.in_flight -= 1
        return ToolResult.from_text(f"slept {seconds:g}s {args.get('tag', '')}".rstrip())


class EchoTool(Tool):
    """Answers with its arguments (``text``) and records every context it saw."""

    name = "echo"
    description = "Repeat the text back."
    input_schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self, name: str = "echo", *, exclusive: bool = False,
                 wants_state: bool = False) -> None:
        self.name = name
        self.exclusive = exclusive
        self.wants_state = wants_state
        self.contexts: list[ToolContext] = []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        self.contexts.append(ctx)
        return ToolResult.from_text(str(args["text"]))


class CounterTool(Tool):
    """Counts its calls per trajectory in the session; reports cleanups in ``released``."""

    name = "count"
    description = "Increment and return this conversation's counter."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.released: list[int] = []

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        session = ctx.session
        if session is None:
            raise RuntimeError("CounterTool needs a session")
        if "count" not in session:
            index = ctx.batch_index
            session.set("count", 0, cleanup=lambda: self.released.append(index))
        session.set("count", session["count"] + 1)
        return ToolResult.from_text(str(session["count"]))


class RaisingTool(Tool):
    """Raises ``exc`` on every call."""

    description = "Always fails."
    input_schema = {"type": "object"}

    def __init__(self, exc: BaseException, name: str = "boom") -> None:
        self.name = name
        self.exc = exc

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise self.exc


Script = Callable[[int, int], str]


class ScriptedPolicy:
    """A policy for ``env.rollout`` that writes scripted assistant messages.

    Args:
        script: ``script(batch_index, turn) -> text``, or a list (one per flat batch item) of lists
            (one text per turn; the last one repeats).
        role: the role of the written messages.

    The turn of an item is the number of ``role`` messages already in its history.
    """

    def __init__(self, script: Script | Sequence[Sequence[str]], role: str = "assistant") -> None:
        self.role = role
        if callable(script):
            self._script: Script = script
        else:
            texts = [list(t) for t in script]
            self._script = lambda i, turn: texts[i][min(turn, len(texts[i]) - 1)]

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        from tensordict import lazy_stack
        from torchrl.data.llm import History

        shape = tensordict.batch_size
        count = math.prod(shape)
        prompt = tensordict["history"].prompt
        roles = prompt.role
        flat_roles = _flatten(roles, len(shape))
        texts = [self._script(i, sum(r == self.role for r in flat_roles[i])) for i in range(count)]
        if len(shape) == 1:
            response = History(
                role=[[self.role] for _ in texts], content=[[t] for t in texts],
                batch_size=(count, 1),
            )
        else:
            # tensordict cannot build a 3-level nested History from lists: stack per item
            nested: Any = [History(role=[self.role], content=[t], batch_size=(1,)) for t in texts]
            for size in reversed(shape[1:]):
                nested = [lazy_stack(nested[i : i + size]) for i in range(0, len(nested), size)]
            response = lazy_stack(nested)
        history = tensordict["history"]
        history.full = prompt.extend(response, inplace=False, dim=-1)
        history.response = response
        tensordict.set("history", history)
        return tensordict


def _flatten(values: Any, depth: int) -> list[Any]:
    for _ in range(depth - 1):
        values = [x for v in values for x in v]
    return list(values)
