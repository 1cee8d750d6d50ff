"""The ``ToolCallParser`` protocol and helpers every wire format shares."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult, ToolResult

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool


_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_BLANK_LINES = re.compile(r"\n{3,}")


@runtime_checkable
class ToolCallParser(Protocol):
    """Reads tool calls out of an assistant message and renders results back.

    ``parse`` never raises: malformed call sites become ``ParseResult.errors``.
    """

    def parse(self, message: str | Mapping[str, Any]) -> ParseResult:
        """Find the calls of one message (a string, or a message dict with ``content``)."""
        ...

    def render_result(
        self, call: ParsedCall | MalformedCall, result: ToolResult
    ) -> dict[str, Any]:
        """The tool message answering ``call`` (``role``, ``content``, ``tool_call_id``, ``name``)."""
        ...

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The block advertising ``tools`` in the system prompt."""
        ...


def message_content(message: str | Mapping[str, Any]) -> str:
    """The text of a message given as a string or a message dict (anything else gives "")."""
    if isinstance(message, str):
        return message
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else ""


def reasoning_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of ``<think>...</think>`` reasoning in ``text``.

    An unclosed ``<think>`` runs to the end of the text; a ``</think>`` with no opening tag (the
    template opened it in the prompt) makes everything before it reasoning.
    """
    spans: list[tuple[int, int]] = []
    first_close = text.find(_THINK_CLOSE)
    first_open = text.find(_THINK_OPEN)
    pos = 0
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        pos = first_close + len(_THINK_CLOSE)
        spans.append((0, pos))
    while True:
        start = text.find(_THINK_OPEN, pos)
        if start == -1:
            return spans
        end = text.find(_THINK_CLOSE, start + len(_THINK_OPEN))
        if end == -1:
            spans.append((start, len(text)))
            return spans
        pos = end + len(_THINK_CLOSE)
        spans.append((start, pos))


def mask_reasoning(text: str) -> str:
    """``text`` with every reasoning span replaced by spaces (same length, so offsets still hold)."""
    if _THINK_OPEN not in text and _THINK_CLOSE not in text:
        return text
    return _replace_spans(text, reasoning_spans(text), " ")


def remove_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` without the given (sorted, non-overlapping) spans, trimmed."""
    if not spans:
        return text.strip()
    kept = _replace_spans(text, spans, "")
    if "\n\n\n" in kept:
        kept = _BLANK_LINES.sub("\n\n", kept)
    return kept.strip()


def _replace_spans(text: str, spans: Sequence[tuple[int, int]], fill: str) -> str:
    """``text`` with each (sorted, non-overlapping) span replaced by ``fill * len(span)``."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append(fill * (end - start))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def default_call_id(index: int) -> str:
    """The id given to the ``index``-th call site of a message when the wire format carries none."""
    return f"call_{index}"


def render_tool_message(call: ParsedCall | MalformedCall, result: ToolResult) -> dict[str, Any]:
    """An OpenAI-style tool message: ``role``, ``content``, ``tool_call_id``, ``name``."""
    name = call.tool if isinstance(call, ParsedCall) else (call.tool or "")
    return {"role": "tool", "content": result.text, "tool_call_id": call.call_id, "name": name}


def truncate(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, for error messages."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
