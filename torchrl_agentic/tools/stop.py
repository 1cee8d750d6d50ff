"""``StopTool``: lets the model end its own trajectory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchrl_agentic.errors import StopSignal
from torchrl_agentic.tool import Tool
from torchrl_agentic.types import ToolContext, ToolResult


class StopTool(Tool):
    """The model calls ``stop`` (with an optional ``reason``) when it is done.

    The item's ``("agentic", "stop_requested")`` is set and its ``done`` and ``terminated`` become
    True at the end of the step.
    """

    name = "stop"
    description = "End the conversation when the task is complete."
    input_schema = {
        "type": "object",
        "properties": {"reason": {"type": "string", "description": "Why you are stopping."}},
        "additionalProperties": False,
    }

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise StopSignal(str(args.get("reason", "")))
