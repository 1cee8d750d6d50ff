"""Exceptions, sorted by who is to blame.

Model-visible errors derive from :class:`ToolError`: when one escapes a call it becomes an ``is_error``
tool message for the model and the batch goes on. Developer errors (:class:`ConfigError`, plus plain
``TypeError``/``ValueError``) are raised at construction and never reach the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_MAX_EXC_TEXT = 2000


class ToolError(Exception):
    """An error the model caused or should see; raise it inside ``Tool.run`` to return an error result.

    Args:
        message: the text the model reads.
        detail: structured data about the failure, for logs and recorders (not shown to the model).
    """

    def __init__(self, message: str, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = dict(detail or {})


class UnknownToolError(ToolError):
    """The model called a tool that the compose does not hold."""

    def __init__(self, tool: str, available: Sequence[str]) -> None:
        self.tool = tool
        self.available = tuple(available)
        names = ", ".join(self.available) or "(none)"
        super().__init__(f"unknown tool {tool!r}; available tools: {names}", {"tool": tool})


class InvalidArgumentsError(ToolError):
    """The call's arguments do not match the tool's ``input_schema``."""

    def __init__(self, tool: str, reason: str) -> None:
        self.tool = tool
        self.reason = reason
        super().__init__(f"invalid arguments for tool {tool!r}: {reason}", {"tool": tool})


class MalformedCallError(ToolError):
    """The tool call could not be parsed from the message."""

    def __init__(self, reason: str, raw: str = "") -> None:
        self.reason = reason
        self.raw = raw
        super().__init__(f"malformed tool call: {reason}", {"raw": raw})


class ToolTimeoutError(ToolError):
    """The call did not finish (rate-limiter wait included) within its time budget."""

    def __init__(self, tool: str, seconds: float) -> None:
        self.tool = tool
        self.seconds = seconds
        super().__init__(
            f"tool {tool!r} timed out after {seconds:g} s and was cancelled",
            {"tool": tool, "seconds": seconds},
        )


class ToolCallLimitError(ToolError):
    """The message made more calls than ``max_calls_per_step`` allows."""

    def __init__(self, tool: str, limit: int) -> None:
        self.tool = tool
        self.limit = limit
        super().__init__(
            f"call to {tool!r} not run: at most {limit} tool call(s) per step are allowed"
        )


class ToolExecutionError(ToolError):
    """A tool raised an unexpected exception; the model sees its type and message only."""

    def __init__(self, tool: str, exc: BaseException) -> None:
        self.tool = tool
        self.exc_type = type(exc).__name__
        text = str(exc)
        if len(text) > _MAX_EXC_TEXT:  # a tool's message must not flood the context window
            text = text[:_MAX_EXC_TEXT] + f"... [{len(text) - _MAX_EXC_TEXT} more characters]"
        detail = f"{self.exc_type}: {text}" if text else self.exc_type
        super().__init__(f"tool {tool!r} failed: {detail}")


class StopSignal(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a tool to end its trajectory: the item's ``stop_requested`` and ``done`` become True.

    Args:
        reason: why the model (or the tool) stopped; echoed in the tool message.
    """

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class ConfigError(ValueError):
    """A developer's misuse, raised at construction with the rule, the value and the fix."""
