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
    """A function returning None for valid arguments, or a one-line explanation for invalid ones."""
    validator = jsonschema.validators.validator_for(schema)(schema)

    def validate(args: Mapping[str, Any]) -> str | None:
        error = best_match(validator.iter_errors(args))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{error.message} (at {where})" if where else error.message

    return validate


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
