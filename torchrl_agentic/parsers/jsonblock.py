"""TorchRL's legacy JSON replies: ``{"message": ..., "tools": [{"tool": ..., "args": {...}}]}``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchrl_agentic.parsers._calls import (
    build_result,
    call_from_object,
    dump_raw,
    json_kind,
    schema_lines,
)
from torchrl_agentic.parsers.base import (
    default_call_id,
    message_content,
    reasoning_spans,
    remove_spans,
    render_tool_message,
    truncate,
)
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult, ToolResult

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool

_FENCE = "```"
_ENTRY = '{"tool": "tool_name", "args": {...}}'


def _unfence(body: str) -> str:
    """``body`` without a surrounding ```` ``` ```` / ```` ```json ```` fence, if it has one."""
    if not (body.startswith(_FENCE) and body.endswith(_FENCE) and len(body) > 2 * len(_FENCE)):
        return body
    newline = body.find("\n")
    if newline == -1 or body[len(_FENCE) : newline].strip().lower() not in ("", "json"):
        return body
    return body[newline + 1 : -len(_FENCE)]


def _tag(entry: object, index: int) -> str:
    tag = entry.get("tag") if isinstance(entry, Mapping) else None
    return tag if isinstance(tag, str) and tag else default_call_id(index)


class JSONBlockParser:
    """Reads TorchRL's legacy ``JSONCallParser`` format: the whole reply is one JSON object.

    The object (optionally in a ```` ```json ```` fence, optionally after closed ``<think>``
    reasoning) has a ``"message"`` for the user and a ``"tools"`` list of
    ``{"tool": name, "args": {...}, "tag": optional id}``. A reply that is not such an object is
    plain text. ``text`` is the reasoning (if any) followed by ``"message"``.

    Examples:
        >>> reply = '{"message": "Searching.", "tools": [{"tool": "search", "args": {"q": "x"}}]}'
        >>> result = JSONBlockParser().parse(reply)
        >>> result.text
        'Searching.'
        >>> call = result.calls[0]
        >>> call.tool, dict(call.args), call.call_id
        ('search', {'q': 'x'}, 'call_0')
    """

    def parse(self, message: str | Mapping[str, Any]) -> ParseResult:
        """Read the calls of a JSON reply; anything else is plain text. Never raises."""
        text = message_content(message)
        spans = reasoning_spans(text)
        start = spans[-1][1] if spans else 0
        try:
            obj = json.loads(_unfence(text[start:].strip()))
        except (ValueError, RecursionError):
            return ParseResult(text=text.strip())
        if not isinstance(obj, dict) or ("tools" not in obj and "message" not in obj):
            return ParseResult(text=text.strip())
        reply = obj.get("message")
        reasoning = remove_spans(text, [(start, len(text))])
        cleaned = "\n\n".join(p for p in (reasoning, reply if isinstance(reply, str) else "") if p)
        entries = obj.get("tools")
        if entries is None:
            return ParseResult(text=cleaned)
        if not isinstance(entries, list):
            raw = truncate(dump_raw(entries))
            problem = f'"tools" must be a list of {_ENTRY} objects, got {json_kind(entries)}'
            return build_result(cleaned, [MalformedCall(problem, default_call_id(0), raw=raw)])
        sites = [
            call_from_object(
                entry,
                index=i,
                call_id=_tag(entry, i),
                raw=dump_raw(entry),
                where=f"tools[{i}]",
                name_key="tool",
                args_keys=("args",),
            )
            for i, entry in enumerate(entries)
        ]
        return build_result(cleaned, sites)

    def render_calls(self, calls: Sequence[ParsedCall], message: str = "") -> str:
        """A reply carrying ``message`` and ``calls``, ids as tags (``parse`` reads it back)."""
        tools = [{"tool": c.tool, "args": dict(c.args), "tag": c.call_id} for c in calls]
        return json.dumps({"message": message, "tools": tools}, ensure_ascii=False)

    def render_result(self, call: ParsedCall | MalformedCall, result: ToolResult) -> dict[str, Any]:
        """The tool message answering ``call``."""
        return render_tool_message(call, result)

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The system-prompt block listing ``tools`` and the JSON reply format."""
        return (
            "# Tools\n\nYou can call the following tools, described as JSON function signatures:\n"
            f"<tools>\n{schema_lines(tools)}\n</tools>\n\n"
            "To call tools, reply with a single JSON object and nothing else:\n"
            '{"message": "<text for the user>", "tools": [{"tool": "<tool-name>", '
            '"args": <args-json-object>, "tag": "<optional call id>"}]}\n'
            'Reply with "tools": [] when you need no tool.'
        )
