"""Function-call objects, ``{"name": ..., "arguments": object or JSON string}``, shared by the formats.

Every format reads the same kind of object under its own key names (Hermes ``name``/``arguments``,
legacy JSON ``tool``/``args``): decoding the arguments, turning the object into a call or saying what
is wrong with it, and gathering call sites into a ``ParseResult``. Parsing runs for every batch item at
every step, so the well-formed path checks exact types before falling back to ABC ``isinstance``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchrl_agentic.parsers.base import truncate
from torchrl_agentic.schema import openai_schema
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool

_KINDS = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
    type(None): "null",
}
_ARGS_HINT = 'write the arguments as a JSON object, e.g. {"query": "..."}'
# Whether ``new_call`` may fill a ParsedCall's ``__dict__`` and get what the constructor makes.
_FILL_CALLS = (
    tuple(f.name for f in dataclasses.fields(ParsedCall)) == ("tool", "args", "call_id", "index", "raw")
    and not hasattr(ParsedCall, "__post_init__")
    and not hasattr(ParsedCall, "__slots__")
    and ParsedCall.__new__ is object.__new__
)


def json_kind(value: object) -> str:
    """The JSON name of ``value``'s type ("object", "array", "string"...), for error messages."""
    if isinstance(value, Mapping):
        return "object"
    return _KINDS.get(type(value), type(value).__name__)


def json_error(exc: Exception) -> str:
    """What a JSON decoding error says, for the model ("Expecting value at char 3")."""
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

    Returns ``(args, "")``, or ``(None, problem)`` where ``problem`` completes a sentence whose
    subject is the arguments ("must be a JSON object, got array"). A blank string means no
    arguments.

    Examples:
        >>> decode_arguments('{"q": "x"}')
        ({'q': 'x'}, '')
        >>> decode_arguments([1])
        (None, 'must be a JSON object, got array')
    """
    if type(value) is dict or isinstance(value, Mapping):
        return dict(value), ""
    if not isinstance(value, str):
        return None, f"must be a JSON object, got {json_kind(value)}"
    if not value.strip():
        return {}, ""
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError) as exc:
        return None, f"is a string that is not valid JSON ({json_error(exc)})"
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
    """The call described by ``obj`` (``{name_key: str, args_key: object}``), or what is wrong.

    The first of ``args_keys`` present holds the arguments; none present (or null) means ``{}``.
    ``where`` names the call site in error messages ("<tool_call>", "tools[2]").

    Examples:
        >>> obj = {"name": "search", "arguments": {"q": "x"}}
        >>> call_from_object(obj, index=0, call_id="c", raw="", where="<tool_call>").tool
        'search'
        >>> call_from_object({"arguments": {}}, index=0, call_id="c", raw="", where="w").message
        'missing "name" in w; write {"name": "tool_name", "arguments": {...}}'
    """
    if type(obj) is not dict and not isinstance(obj, Mapping):
        return _malformed(
            f"expected a JSON object {_shape(name_key, args_keys)} in {where}, got {json_kind(obj)}",
            call_id,
            index,
            raw,
        )
    name = obj.get(name_key)
    if name is None:
        return _malformed(
            f'missing "{name_key}" in {where}; write {_shape(name_key, args_keys)}', call_id, index, raw
        )
    if not isinstance(name, str) or not name:
        problem = (
            f'"{name_key}" in {where} must be a non-empty string, got {json_kind(name)} '
            f"{truncate(dump_raw(name), 40)}"
        )
        return _malformed(problem, call_id, index, raw)
    for key in args_keys:
        if key in obj:
            break
    else:
        key = args_keys[0]
    value = obj.get(key)
    args, problem = ({}, "") if value is None else decode_arguments(value)
    if args is None:
        return _malformed(f'"{key}" in {where} {problem}; {_ARGS_HINT}', call_id, index, raw, tool=name)
    return new_call(name, args, call_id, index, raw)


def new_call(tool: str, args: dict[str, Any], call_id: str, index: int, raw: str) -> ParsedCall:
    """``ParsedCall(tool, args, call_id, index=index, raw=raw)``, made without its ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, which costs
    more than decoding a small call's JSON; parsing makes a call per call site, batch item and step.
    Filling the new instance's ``__dict__`` gives the same object, as long as ``ParsedCall`` keeps
    exactly these fields, no ``__post_init__`` and no slots (else this calls ``ParsedCall``).
    """
    if not _FILL_CALLS:
        return ParsedCall(tool, args, call_id, index=index, raw=raw)
    call = object.__new__(ParsedCall)
    call.__dict__.update(tool=tool, args=args, call_id=call_id, index=index, raw=raw)
    return call


def _shape(name_key: str, args_keys: Sequence[str]) -> str:
    """The object ``call_from_object`` expects, for error messages."""
    return f'{{"{name_key}": "tool_name", "{args_keys[0]}": {{...}}}}'


def _malformed(message: str, call_id: str, index: int, raw: str, tool: str | None = None) -> MalformedCall:
    return MalformedCall(message, call_id, index=index, raw=truncate(raw), tool=tool)


def build_result(text: str, sites: Sequence[ParsedCall | MalformedCall]) -> ParseResult:
    """A ParseResult from the call sites of a message, in message order."""
    calls = tuple([s for s in sites if isinstance(s, ParsedCall)])
    errors = tuple([s for s in sites if isinstance(s, MalformedCall)]) if len(calls) < len(sites) else ()
    return ParseResult(text=text, calls=calls, errors=errors)


def schema_lines(tools: Sequence[Tool], sep: str = "\n") -> str:
    """The OpenAI function spec of each tool as one line of JSON, joined by ``sep``."""
    return sep.join(json.dumps(openai_schema(tool), ensure_ascii=False) for tool in tools)
