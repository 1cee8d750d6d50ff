"""Structured ``tool_calls`` on a message dict (OpenAI chat API, vLLM servers, TorchRL History)."""

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
from torchrl_agentic.parsers.base import default_call_id, message_content, render_tool_message
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult, ToolResult

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool


def _entry_call(entry: object, index: int) -> ParsedCall | MalformedCall:
    """The call of one ``tool_calls`` entry, nested (OpenAI) or flat (TorchRL History)."""
    where = f"tool_calls[{index}]"
    call_id = default_call_id(index)
    body = entry
    if isinstance(entry, Mapping):
        given = entry.get("id")
        call_id = given if isinstance(given, str) and given else call_id
        if "function" in entry:
            body, where = entry["function"], f"{where}.function"
    return call_from_object(body, index=index, call_id=call_id, raw=dump_raw(entry), where=where)


class OpenAIParser:
    """Reads the structured ``tool_calls`` of a message dict; the content is never scanned.

    Entries are either OpenAI-shaped ``{"id", "type": "function", "function": {"name",
    "arguments"}}`` or flat ``{"name", "arguments"}`` as TorchRL's ``History.from_text`` produces
    them; ``arguments`` is a JSON object or a string holding one. Entries without an ``id`` get
    ``call_<index>``.

    Examples:
        >>> message = {
        ...     "role": "assistant",
        ...     "content": "Searching.",
        ...     "tool_calls": [{"id": "call_a1", "type": "function",
        ...                     "function": {"name": "search", "arguments": '{"q": "x"}'}}],
        ... }
        >>> result = OpenAIParser().parse(message)
        >>> result.text
        'Searching.'
        >>> call = result.calls[0]
        >>> call.tool, dict(call.args), call.call_id
        ('search', {'q': 'x'}, 'call_a1')
    """

    def parse(self, message: str | Mapping[str, Any]) -> ParseResult:
        """Read the ``tool_calls`` of ``message`` (a string has none); never raises."""
        text = message_content(message).strip()
        entries = message.get("tool_calls") if isinstance(message, Mapping) else None
        if entries is None:
            return ParseResult(text=text)
        if not isinstance(entries, (list, tuple)):
            problem = f'"tool_calls" must be a list of calls, got {json_kind(entries)}'
            return build_result(text, [MalformedCall(problem, default_call_id(0))])
        return build_result(text, [_entry_call(entry, i) for i, entry in enumerate(entries)])

    def render_call(self, call: ParsedCall) -> dict[str, Any]:
        """``call`` as an OpenAI ``tool_calls`` entry (``parse`` reads it back)."""
        arguments = json.dumps(dict(call.args), ensure_ascii=False)
        return {
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.tool, "arguments": arguments},
        }

    def render_result(self, call: ParsedCall | MalformedCall, result: ToolResult) -> dict[str, Any]:
        """The tool message answering ``call``."""
        return render_tool_message(call, result)

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The OpenAI function specs of ``tools`` as a JSON list, one spec per line."""
        return "[\n" + schema_lines(tools, sep=",\n") + "\n]"
