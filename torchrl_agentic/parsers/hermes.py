"""Hermes / Qwen tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchrl_agentic.parsers._calls import build_result, call_from_object, schema_lines
from torchrl_agentic.parsers._tagged import decode_tagged_json
from torchrl_agentic.parsers.base import (
    default_call_id,
    mask_reasoning,
    message_content,
    remove_spans,
    render_tool_message,
    truncate,
)
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult, ToolResult

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"


class HermesParser:
    """Reads Hermes/Qwen ``<tool_call>`` blocks (Qwen2.5, Qwen3, Hermes chat templates).

    Each block holds one JSON object with ``"name"`` and ``"arguments"`` (or ``"parameters"``);
    blocks inside ``<think>`` reasoning are ignored. Call ids are ``call_0``, ``call_1``... by
    position, since the format carries none.

    Examples:
        >>> parser = HermesParser()
        >>> result = parser.parse(
        ...     'Let me look.\\n<tool_call>\\n'
        ...     '{"name": "search", "arguments": {"q": "x"}}\\n</tool_call>'
        ... )
        >>> result.text
        'Let me look.'
        >>> call = result.calls[0]
        >>> call.tool, dict(call.args), call.call_id
        ('search', {'q': 'x'}, 'call_0')
        >>> parser.parse("<tool_call>{'name': 'search'}</tool_call>").errors[0].message
        'invalid JSON in <tool_call>: Expecting property name enclosed in double quotes at char 1'
    """

    def parse(self, message: str | Mapping[str, Any]) -> ParseResult:
        """Find the ``<tool_call>`` blocks of ``message``; never raises."""
        text = message_content(message)
        masked = mask_reasoning(text)
        start = masked.find(_OPEN)
        if start == -1:
            return ParseResult(text=text.strip())
        sites: list[ParsedCall | MalformedCall] = []
        spans: list[tuple[int, int]] = []
        while start != -1:
            index = len(sites)
            call_id = default_call_id(index)
            # Decode the original text: a "<think>" inside a JSON string must not hide the call.
            value, end, problem = decode_tagged_json(text, start + len(_OPEN), _CLOSE, _OPEN)
            raw = text[start:end]
            if problem:
                name = value.get("name") if isinstance(value, Mapping) else None
                tool = name if isinstance(name, str) else None
                sites.append(MalformedCall(problem, call_id, index=index, raw=truncate(raw), tool=tool))
            else:
                sites.append(call_from_object(value, index=index, call_id=call_id, raw=raw, where=_OPEN))
            spans.append((start, end))
            start = masked.find(_OPEN, end)
        return build_result(remove_spans(text, spans), sites)

    def render_call(self, call: ParsedCall) -> str:
        """``call`` written as a ``<tool_call>`` block (``parse`` reads it back)."""
        body = json.dumps({"name": call.tool, "arguments": dict(call.args)}, ensure_ascii=False)
        return f"{_OPEN}\n{body}\n{_CLOSE}"

    def render_result(self, call: ParsedCall | MalformedCall, result: ToolResult) -> dict[str, Any]:
        """The tool message answering ``call`` (the chat template adds ``<tool_response>``)."""
        return render_tool_message(call, result)

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The Qwen2.5/Hermes system-prompt block listing ``tools`` and the call syntax."""
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            f"{schema_lines(tools)}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            f"{_OPEN}{_CLOSE} XML tags:\n{_OPEN}\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n'
            f"{_CLOSE}"
        )
