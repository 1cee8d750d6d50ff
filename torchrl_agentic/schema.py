"""JSON Schema handling: checking tool schemas, validating arguments, rendering OpenAI function specs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import jsonschema
from jsonschema.exceptions import best_match

if TYPE_CHECKING:
    from torchrl_agentic.tool import Tool

ArgsValidator = Callable[[Mapping[str, Any]], "str | None"]


def check_input_schema(owner: str, schema: object) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``schema`` is a JSON Schema for an object."""
    if not isinstance(schema, Mapping):
        raise TypeError(
            f"{owner}.input_schema must be a JSON Schema dict, got {type(schema).__name__}; "
            'use e.g. {"type": "object", "properties": {...}}'
        )
    if schema.get("type", "object") != "object":
        raise ValueError(
            f"{owner}.input_schema must describe an object (tool arguments are keyword arguments), "
            f"got type {schema.get('type')!r}; wrap the value in an object property"
        )
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(
            f"{owner}.input_schema is not a valid JSON Schema: {exc.message}; fix the schema"
        ) from exc


def compile_validator(schema: Mapping[str, Any]) -> ArgsValidator:
    """A function returning None for valid arguments, or a one-line explanation for invalid ones.

    jsonschema costs about 17 us per call even for a trivial schema, which is most of a no-op tool
    call; so schemas made only of the common keywords (typed properties, ``required``,
    ``additionalProperties: false``, string ``enum``) get a conservative fast check first, and
    jsonschema decides whenever the fast check cannot vouch for the arguments.
    """
    validator = jsonschema.validators.validator_for(schema)(schema)
    fast = _fast_check(schema)

    def validate(args: Mapping[str, Any]) -> str | None:
        if fast is not None and fast(args):
            return None
        error = best_match(validator.iter_errors(args))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{error.message} (at {where})" if where else error.message

    return validate


_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) in (int, float),
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _fast_check(schema: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """A check that returns True only for arguments jsonschema would accept, or None if the schema
    uses keywords it does not know (then jsonschema alone decides)."""
    if set(schema) - _ANNOTATIONS - {"type", "properties", "required", "additionalProperties"}:
        return None
    if schema.get("type", "object") != "object":
        return None
    extra = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    if not isinstance(extra, bool) or not isinstance(required, list):
        return None
    if not isinstance(properties, Mapping):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for key, sub in properties.items():
        check = _fast_value_check(sub)
        if check is None:
            return None
        checks[key] = check

    def fast(args: Mapping[str, Any]) -> bool:
        if type(args) is not dict:
            return False
        for key in required:
            if key not in args:
                return False
        for key, value in args.items():
            check = checks.get(key)
            if check is None:
                if not extra:
                    return False
            elif not check(value):
                return False
        return True

    return fast


def _fast_value_check(schema: object) -> Callable[[Any], bool] | None:
    if not isinstance(schema, Mapping) or set(schema) - _ANNOTATIONS - {"type", "enum"}:
        return None
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _TYPE_CHECKS:
        return None
    type_ok = _TYPE_CHECKS[kind]
    if "enum" not in schema:
        return type_ok
    allowed = schema["enum"]
    if not isinstance(allowed, list) or not all(isinstance(v, str) for v in allowed):
        return None
    choices = frozenset(allowed)
    return lambda v: isinstance(v, str) and v in choices and type_ok(v)


def openai_schema(tool: Tool) -> dict[str, Any]:
    """The OpenAI function-calling spec of ``tool`` (what a chat template's ``tools=`` takes)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.input_schema),
        },
    }
