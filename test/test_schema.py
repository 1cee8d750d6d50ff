"""``schema``: checking tool schemas, validating arguments, rendering OpenAI function specs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchrl_agentic import Tool, ToolContext, ToolResult
from torchrl_agentic.schema import _fast_check, check_input_schema, compile_validator, openai_schema

NESTED = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "filters": {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        },
        "mode": {"type": "string", "enum": ["fast", "exact"]},
    },
    "required": ["query"],
    "additionalProperties": False,
}

SIMPLE = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "mode": {"type": "string", "enum": ["a", "b"]}},
    "required": ["n"],
    "additionalProperties": False,
}


class TestCompileValidator:
    @pytest.mark.parametrize(
        "args",
        [
            {"query": "x"},
            {"query": "x", "limit": 3, "filters": {"tags": ["a", "b"]}, "mode": "exact"},
        ],
    )
    def test_valid_arguments(self, args):
        assert compile_validator(NESTED)(args) is None

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ({}, "'query' is a required property"),
            ({"query": 3}, "3 is not of type 'string' (at query)"),
            ({"query": "x", "limit": 0}, "0 is less than the minimum of 1 (at limit)"),
            (
                {"query": "x", "filters": {"tags": ["a", 7]}},
                "7 is not of type 'string' (at filters/tags/1)",
            ),
            ({"query": "x", "mode": "slow"}, "'slow' is not one of ['fast', 'exact'] (at mode)"),
        ],
    )
    def test_messages_include_the_path(self, args, message):
        assert compile_validator(NESTED)(args) == message

    def test_unexpected_property(self):
        problem = compile_validator(NESTED)({"query": "x", "extra": 1})
        assert problem is not None and "Additional properties are not allowed ('extra'" in problem

    @pytest.mark.parametrize(
        ("args", "valid"),
        [
            ({"n": 1}, True),
            ({"n": 1, "mode": "b"}, True),
            ({"n": True}, False),  # a bool is not an integer in JSON Schema
            ({"n": 1.5}, False),
            ({"n": 1, "mode": "c"}, False),
            ({"n": 1, "other": 2}, False),
            ({"mode": "a"}, False),
        ],
    )
    def test_agrees_with_jsonschema_on_simple_schemas(self, args, valid):
        assert (compile_validator(SIMPLE)(args) is None) is valid

    def test_enum_does_not_bypass_the_type(self):
        schema = {"type": "object", "properties": {"n": {"type": "integer", "enum": ["1"]}}}
        assert compile_validator(schema)({"n": "1"}) == "'1' is not of type 'integer' (at n)"


class TestCheckInputSchema:
    @pytest.mark.parametrize("schema", [{"type": "object"}, {}, NESTED])
    def test_object_schemas_pass(self, schema):
        assert check_input_schema("MyTool", schema) is None

    def test_non_mapping(self):
        match = r"MyTool\.input_schema must be a JSON Schema dict, got str"
        with pytest.raises(TypeError, match=match):
            check_input_schema("MyTool", '{"type": "object"}')

    @pytest.mark.parametrize("kind", ["array", "string", "integer"])
    def test_non_object_type(self, kind):
        with pytest.raises(
            ValueError, match=rf"MyTool\.input_schema must describe an object .* got type '{kind}'"
        ):
            check_input_schema("MyTool", {"type": kind})

    def test_invalid_schema(self):
        schema = {"type": "object", "required": "query"}
        with pytest.raises(
            ValueError, match=r"MyTool\.input_schema is not a valid JSON Schema: .*; fix the schema"
        ):
            check_input_schema("MyTool", schema)


class Search(Tool):
    name = "search"
    description = "Search the web."
    input_schema = NESTED

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.from_text("")


class TestOpenAISchema:
    def test_shape(self):
        spec = openai_schema(Search())
        assert spec == {
            "type": "function",
            "function": {"name": "search", "description": "Search the web.", "parameters": NESTED},
        }

    def test_parameters_are_a_copy(self):
        tool = Search()
        spec = openai_schema(tool)
        spec["function"]["parameters"]["type"] = "array"
        assert tool.input_schema["type"] == "object"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
FAST_SCHEMAS = st.fixed_dictionaries(
    {"type": st.just("object")},
    optional={
        "properties": st.dictionaries(
            st.sampled_from(["a", "b", "c"]),
            st.one_of(
                st.fixed_dictionaries({"type": st.sampled_from(
                    ["string", "integer", "number", "boolean", "null", "array", "object"])}),
                st.fixed_dictionaries({
                    "type": st.sampled_from(["string", "integer"]),
                    "enum": st.lists(st.sampled_from(["x", "y", "1"]), min_size=1, max_size=3, unique=True),
                }),
            ),
            max_size=3,
        ),
        "required": st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3),
        "additionalProperties": st.booleans(),
    },
)


class TestFastCheck:
    @settings(max_examples=300, deadline=None)
    @given(schema=FAST_SCHEMAS, args=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), JSON_VALUES))
    def test_fast_path_agrees_with_jsonschema(self, schema, args):
        expected = jsonschema.Draft202012Validator(schema).is_valid(args)
        assert (compile_validator(schema)(args) is None) == expected

    def test_schemas_with_other_keywords_use_jsonschema_only(self):
        assert _fast_check({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}) is None
        assert _fast_check({"type": "object", "patternProperties": {}}) is None
        assert _fast_check({"type": "object", "properties": {"n": {"type": ["string", "null"]}}}) is None

    def test_fast_path_never_accepts_what_jsonschema_rejects(self):
        fast = _fast_check({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
        assert fast is not None
        assert fast({"n": 3}) and not fast({"n": True}) and not fast({"n": 1.0}) and not fast({})
