"""TorchRL's legacy XML tool blocks: ``<tool name="search" tag="A">{"query": "x"}</tool>``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchrl_agentic.parsers._calls import build_result, decode_arguments, new_call, schema_lines
from torchrl_agentic.parsers._tagged import decode_tagged_json, skip_blank
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

_WHERE = "<tool>"
_CLOSE = "</tool>"
_START = re.compile(r"<tool(?=[\s>])")
# Attribute values exclude "<" and ">" so that a stray quote cannot make a match scan far ahead.
_OPENING = re.compile(r'<tool((?:\s+[\w-]+="[^"<>]*")*)\s*>')
_ATTR = re.compile(r'([\w-]+)="([^"<>]*)"')
_SYNTAX = '<tool name="tool_name">{"arg": "value"}</tool>'


class XMLParser:
    """Reads TorchRL's legacy ``XMLBlockParser`` format.

    A call is ``<tool name="..." tag="...">JSON object</tool>``; ``tag`` is optional and becomes
    the call id (else ``call_<index>``). An empty body means no arguments. Unlike the legacy
    parser, a body that is not a JSON object is a malformed call, not ``{"raw": body}``.

    Examples:
        >>> result = XMLParser().parse('<tool name="search" tag="A">{"query": "x"}</tool>\\nOk.')
        >>> result.text
        'Ok.'
        >>> call = result.calls[0]
        >>> call.tool, dict(call.args), call.call_id
        ('search', {'query': 'x'}, 'A')
    """

    def parse(self, message: str | Mapping[str, Any]) -> ParseResult:
        """Find the ``<tool>`` blocks of ``message``; never raises."""
        text = message_content(message)
        masked = mask_reasoning(text)
        last_close = text.rfind(_CLOSE)
        sites: list[ParsedCall | MalformedCall] = []
        spans: list[tuple[int, int]] = []
        found = _START.search(masked)
        while found is not None:
            start = found.start()
            site, end = self._site(text, start, len(sites), last_close)
            if site is not None:
                sites.append(site)
                spans.append((start, end))
            found = _START.search(masked, end)
        return build_result(remove_spans(text, spans), sites)

    def _site(
        self, text: str, start: int, index: int, last_close: int
    ) -> tuple[ParsedCall | MalformedCall | None, int]:
        """The call site opening at ``start`` and its end; None for prose such as "a <tool for"."""
        opening = _OPENING.match(text, start)
        if opening is None:
            if last_close < start:
                return None, start + 1
            end = text.find(_CLOSE, start) + len(_CLOSE)
            message = f"malformed {_WHERE} opening tag; write {_SYNTAX}"
            return MalformedCall(
                message, default_call_id(index), index=index, raw=truncate(text[start:end])
            ), end
        attrs = dict(_ATTR.findall(opening.group(1)))
        name = attrs.get("name", "")
        call_id = attrs.get("tag") or default_call_id(index)
        body = skip_blank(text, opening.end())
        value: Any
        if text.startswith(_CLOSE, body):
            value, end, problem = {}, body + len(_CLOSE), ""
        else:
            value, end, problem = decode_tagged_json(text, body, _CLOSE, _WHERE)
        raw = text[start:end]
        if not problem and not name:
            problem = f'missing "name" attribute in {_WHERE}; write {_SYNTAX}'
        if not problem:
            args, complaint = decode_arguments(value)
            if args is not None:
                return new_call(name, args, call_id, index, raw), end
            problem = f"the body of {_WHERE} {complaint}; write {_SYNTAX}"
        return MalformedCall(
            problem, call_id, index=index, raw=truncate(raw), tool=name or None
        ), end

    def render_call(self, call: ParsedCall) -> str:
        """``call`` written as a ``<tool>`` block, its id as the tag (``parse`` reads it back)."""
        tag = f' tag="{call.call_id}"' if re.fullmatch(r'[^"<>]+', call.call_id) else ""
        body = json.dumps(dict(call.args), ensure_ascii=False)
        return f'<tool name="{call.tool}"{tag}>{body}</tool>'

    def render_result(self, call: ParsedCall | MalformedCall, result: ToolResult) -> dict[str, Any]:
        """The tool message answering ``call``."""
        return render_tool_message(call, result)

    def render_tools(self, tools: Sequence[Tool]) -> str:
        """The system-prompt block listing ``tools`` and the ``<tool>`` call syntax."""
        return (
            "# Tools\n\nYou can call the following tools, described as JSON function signatures:\n"
            f"<tools>\n{schema_lines(tools)}\n</tools>\n\n"
            "To call a tool, write a block with its name and a JSON object of arguments:\n"
            '<tool name="tool_name" tag="optional_id">{"arg": "value"}</tool>\n'
            "You may write several blocks in one message; each gets its own result."
        )
