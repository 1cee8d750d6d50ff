"""Hermes / Qwen tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

This module also holds the JSON helpers the other wire formats share: decoding an arguments value,
turning a ``{"name", "arguments"}`` object into a call, and decoding a JSON body that a closing tag
must follow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchrl_agentic.parsers.base import (
    default_call_id,
    mask_reasoning,
    message_content,
    remove_spans,
    render_tool_message,
    truncate,
)
from torchrl_agentic.schema import openai_schema
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult, ToolResult

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"\s*")
_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
          float: "number", type(None): "null"}
_ARGS_HINT = 'write the arguments as a JSON object, e.g. {"query": "..."}'


def json_kind(value: object) -> str:
    """The JSON name of ``value``'s type ("object", "array", "string"...), for error messages."""
    if isinstance(value, Mapping):
        return "object"
    return _KINDS.get(type(value), type(value).__name__)


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        # Some messages end with "at" ("Unterminated string starting at"); say the place once.
        return f"{exc.msg.removesuffix(' at')} at char {exc.pos}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def dump_raw(value: object) -> str:
    """``value`` as JSON for ``raw`` fields, falling back to a placeholder; never raises."""
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (ValueError, TypeError, RecursionError):
        return f"<unprintable {json_kind(value)}>"


def decode_arguments(value: object) -> tuple[dict[str, Any] | None, str]:
    """Arguments given as a JSON object, or as a string holding one.

    Returns ``(args, "")``, or ``(None, problem)`` where ``problem`` completes a sentence whose subject
    is the arguments ("must be a JSON object, got array"). A blank string means no arguments.
    """
    if isinstance(value, Mapping):
        return dict(value), ""
    if not isinstance(value, str):
        return None, f"must be a JSON object, got {json_kind(value)}"
    if not value.strip():
        return {}, ""
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError) as exc:
        return None, f"is a string that is not valid JSON ({_json_error(exc)})"
    if isinstance(decoded, dict):
        return decoded, ""
    return None, f"is a string holding a JSON {json_kind(decoded)}, not an object"


def call_from_object(
    obj: object,
    *,
    index: int,
    call_id: str,
    raw: str,
    where: str,
    name_key: str = "name",
    args_keys: Sequence[str] = ("arguments", "parameters"),
) -> ParsedCall | MalformedCall:
    """The call described by ``obj`` (``{name_key: str, args_key: object}``), or what is wrong with it.

    The first of ``args_keys`` present holds the arguments; none present (or null) means ``{}``.
    ``where`` names the call site in error messages ("<tool_call>", "tools[2]").
    """

    def malformed(message: str, tool: str | None = None) -> MalformedCall:
        return MalformedCall(message, call_id, index=index, raw=truncate(raw), tool=tool)

    shape = f'{{"{name_key}": "tool_name", "{args_keys[0]}": {{...}}}}'
    if not isinstance(obj, Mapping):
        return malformed(f"expected a JSON object {shape} in {where}, got {json_kind(obj)}")
    name = obj.get(name_key)
    if name is None:
        return malformed(f'missing "{name_key}" in {where}; write {shape}')
    if not isinstance(name, str) or not name:
        return malformed(
            f'"{name_key}" in {where} must be a non-empty string, got {json_kind(name)} '
            f"{truncate(dump_raw(name), 40)}"
        )
    key = next((k for k in args_keys if k in obj), args_keys[0])
    value = obj.get(key)
    args, problem = ({}, "") if value is None else decode_arguments(value)
    if args is None:
        return malformed(f'"{key}" in {where} {problem}; {_ARGS_HINT}', tool=name)
    return ParsedCall(name, args, call_id, index=index, raw=raw)


def _decode_windowed(text: str, begin: int, close: str, stop: int) -> tuple[Any, int, str]:
    """``raw_decode`` of the JSON value at ``begin``, on windows of ``text`` ending at ``close`` tags.

    A ``JSONDecodeError`` counts the lines from the start of the decoded string to ``pos``, so
    decoding the whole message at every malformed site would take quadratic time. The first window
    ends at the first close tag (``stop``); a window is widened (at least doubled, to the next close
    tag or the end) only when the value ran off its end, as when a string holds a close tag.

    Returns:
        ``(value, end, error)``: ``end`` is an index into ``text``; ``error`` is "" on success.
    """
    while True:
        window = text[begin:] if stop == -1 else text[begin:stop]
        try:
            value, end = _DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            ran_off = exc.pos == len(window) or exc.msg.startswith("Unterminated string")
            if stop == -1 or not ran_off:
                return None, begin, _json_error(exc)
        except (ValueError, RecursionError) as exc:
            return None, begin, _json_error(exc)
        else:
            return value, begin + end, ""
        stop = text.find(close, max(stop + 1, begin + 2 * (stop - begin)))


def decode_tagged_json(text: str, start: int, close: str, where: str) -> tuple[Any, int, str]:
    """Decode the JSON value opening at ``start`` (after blanks) and the ``close`` tag after it.

    The JSON is decoded first, so ``close`` inside a JSON string does not end the call site; when
    the JSON is invalid, the site ends at the first ``close``.

    Returns:
        ``(value, end, problem)``: ``end`` is just past the close tag (the end of ``text`` when it is
        missing), ``problem`` is "" for a well-formed site and otherwise says what is wrong, written
        for the model; ``value`` is None when the JSON did not decode.
    """
    begin = _BLANK.match(text, start).end()  # type: ignore[union-attr]
    first_close = text.find(close, begin)
    unclosed = f"unclosed {where}: the message ended before {close}"
    value, end, error = _decode_windowed(text, begin, close, first_close)
    if error:
        invalid = f"invalid JSON in {where}: {error}"
        if first_close == -1:
            return None, len(text), f"{unclosed} ({invalid})"
        return None, first_close + len(close), invalid
    after = _BLANK.match(text, end).end()  # type: ignore[union-attr]
    if text.startswith(close, after):
        return value, after + len(close), ""
    close_at = text.find(close, end)
    if close_at == -1:
        return value, len(text), unclosed
    return value, close_at + len(close), (
        f"unexpected text after the JSON value in {where}; "
        f"put exactly one JSON object between {where} and {close}"
    )


def build_result(text: str, sites: Sequence[ParsedCall | MalformedCall]) -> ParseResult:
    """A ParseResult from the call sites of a message, in message order."""
    return ParseResult(
        text=text,
        calls=tuple(s for s in sites if isinstance(s, ParsedCall)),
        errors=tuple(s for s in sites if isinstance(s, MalformedCall)),
    )


def schema_lines(tools: Sequence[Tool], sep: str = "\n") -> str:
    """The OpenAI function spec of each tool as one line of JSON, joined by ``sep``."""
    return sep.join(json.dumps(openai_schema(tool), ensure_ascii=False) for tool in tools)


class HermesParser:
    """Reads Hermes/Qwen ``<tool_call>`` blocks (Qwen2.5, Qwen3, Hermes chat templates).

    Each block holds one JSON object with ``"name"`` and ``"arguments"`` (or ``"parameters"``);
    blocks inside ``<think>`` reasoning are ignored. Call ids are ``call_0``, ``call_1``... by
    position, since the format carries none.

    Examples:
        >>> parser = HermesParser()
        >>> result = parser.parse(
        ...     'Let me look.\\n<tool_call>\\n{"name": "search", "arguments": {"q": "x"}}\\n</tool_call>'
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
        sites: list[ParsedCall | MalformedCall] = []
        spans: list[tuple[int, int]] = []
        start = masked.find(_OPEN)
        while start != -1:
            index = len(sites)
            # Decode the original text: a "<think>" inside a JSON string must not hide the call.
            value, end, problem = decode_tagged_json(text, start + len(_OPEN), _CLOSE, _OPEN)
            raw = text[start:end]
            if problem:
                name = value.get("name") if isinstance(value, Mapping) else None
                sites.append(MalformedCall(
                    problem, default_call_id(index), index=index, raw=truncate(raw),
                    tool=name if isinstance(name, str) else None,
                ))
            else:
                sites.append(call_from_object(
                    value, index=index, call_id=default_call_id(index), raw=raw, where=_OPEN
                ))
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
