"""The ``Tool`` base class: what the model can call."""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Mapping
from typing import Any

from torchrl_agentic.schema import check_input_schema
from torchrl_agentic.types import ToolContext, ToolResult

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")


class Tool:
    """A tool the model can call.

    A subclass that sets ``name``, ``description`` and ``input_schema`` as class attributes and
    defines ``async run(args, ctx)`` is a complete tool. Tool objects are shared by every batch item:
    keep per-trajectory state in ``ctx.session``, not on ``self``.

    Attributes:
        name: the name the model calls (letters, digits, ``_.-``; at most 64 characters).
        description: what the tool does, shown to the model.
        input_schema: JSON Schema (an object) of the arguments.
        output_schema: optional JSON Schema of structured output.
        exclusive: when True, within one message this tool's calls run alone: after every earlier
            call of the message has finished and before any later one starts.
        wants_state: when True and the compose has ``pass_state_to_tools=True``, ``ctx.state``
            holds the item's tensordict (without its history).

    Examples:
        >>> import asyncio
        >>> class Add(Tool):
        ...     name = "add"
        ...     description = "Add two integers."
        ...     input_schema = {
        ...         "type": "object",
        ...         "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        ...         "required": ["a", "b"],
        ...     }
        ...     async def run(self, args, ctx):
        ...         return ToolResult.from_text(str(args["a"] + args["b"]))
        >>> asyncio.run(Add().run({"a": 1, "b": 2}, None)).text
        '3'
    """

    name: str = ""
    description: str = ""
    input_schema: Mapping[str, Any] = {"type": "object"}
    output_schema: Mapping[str, Any] | None = None
    exclusive: bool = False
    wants_state: bool = False

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Serve one call. Raise ``ToolError`` for a model-visible failure."""
        raise NotImplementedError(f"{type(self).__name__} must define `async def run(self, args, ctx)`")

    async def setup(self) -> None:
        """Called once on the compose's event loop before the first call."""

    async def teardown(self) -> None:
        """Called once on the compose's event loop when the compose closes."""

    def clone(self) -> Tool:
        """A copy for an independent compose (``ToolCompose.clone``); override to re-create resources."""
        return copy.copy(self)

    def check(self) -> None:
        """Raise ``TypeError``/``ValueError`` if this tool is not usable (done at compose construction)."""
        owner = type(self).__name__
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise ValueError(
                f"{owner}.name must match {_NAME_RE.pattern} (letters, digits, '_', '.', '-'; "
                f"at most 64 characters), got {self.name!r}; set a class attribute `name = \"my_tool\"`"
            )
        if not isinstance(self.description, str):
            raise TypeError(
                f"{owner}.description must be a str, got {type(self.description).__name__}"
            )
        check_input_schema(owner, self.input_schema)
        if type(self).run is Tool.run:
            raise TypeError(f"{owner} must define `async def run(self, args, ctx)`")
        if not inspect.iscoroutinefunction(type(self).run):
            raise TypeError(
                f"{owner}.run must be a coroutine function (`async def run(self, args, ctx)`), got a "
                "plain function; make it async (wrap blocking work in `await asyncio.to_thread(...)`)"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
