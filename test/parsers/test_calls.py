"""Tests for the function-call object helpers every format shares (``parsers/_calls.py``)."""

from __future__ import annotations

import dataclasses
import json
import pickle
from types import MappingProxyType
from typing import Any

import pytest

from torchrl_agentic.parsers import _calls
from torchrl_agentic.parsers._calls import (
    build_result,
    call_from_object,
    decode_arguments,
    dump_raw,
    json_error,
    json_kind,
    new_call,
)
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult


class TestJsonKind:
    @pytest.mark.parametrize(
        ("value", "kind"),
        [
            ({}, "object"),
            (MappingProxyType({}), "object"),
            ([], "array"),
            ("", "string"),
            (True, "boolean"),
            (1, "number"),
            (1.5, "number"),
            (None, "null"),
            ((), "tuple"),
        ],
    )
    def test_json_names(self, value: Any, kind: str) -> None:
        assert json_kind(value) == kind


class TestJsonError:
    def test_decode_error_says_the_place_once(self) -> None:
        with pytest.raises(json.JSONDecodeError) as info:
            json.loads('"abc')
        assert json_error(info.value) == "Unterminated string starting at char 0"

    def test_recursion_and_other_errors(self) -> None:
        assert json_error(RecursionError("deep")) == "nested too deeply"
        assert json_error(ValueError("odd")) == "odd"


class TestDumpRaw:
    def test_json_with_repr_fallback(self) -> None:
        assert dump_raw({"a": "ü", "b": {1}}) == '{"a": "ü", "b": "{1}"}'

    def test_unprintable_value(self) -> None:
        looped: list[Any] = []
        looped.append(looped)
        assert dump_raw(looped) == "<unprintable array>"


class TestDecodeArguments:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ({"a": 1}, {"a": 1}),
            (MappingProxyType({"a": 1}), {"a": 1}),
            ('{"a": 1}', {"a": 1}),
            ("", {}),
            ("  ", {}),
        ],
    )
    def test_accepts_objects_and_strings_of_objects(self, value: Any, expected: Any) -> None:
        assert decode_arguments(value) == (expected, "")

    def test_copies_the_object(self) -> None:
        given = {"a": 1}
        args, _ = decode_arguments(given)
        assert args == given and args is not given

    @pytest.mark.parametrize(
        ("value", "problem"),
        [
            ([1], "must be a JSON object, got array"),
            (3, "must be a JSON object, got number"),
            (None, "must be a JSON object, got null"),
            ("[1]", "is a string holding a JSON array, not an object"),
            ('{"a": ', "is a string that is not valid JSON (Expecting value at char 6)"),
        ],
    )
    def test_rejects_everything_else(self, value: Any, problem: str) -> None:
        assert decode_arguments(value) == (None, problem)


def make(obj: object, **kwargs: Any) -> ParsedCall | MalformedCall:
    options: dict[str, Any] = {"index": 0, "call_id": "c", "raw": "", "where": "<tool_call>"}
    return call_from_object(obj, **{**options, **kwargs})


class TestCallFromObject:
    def test_parameters_key_and_missing_arguments(self) -> None:
        assert make({"name": "f", "parameters": {"x": 1}}) == ParsedCall("f", {"x": 1}, "c")
        bare = call_from_object({"name": "f"}, index=2, call_id="c", raw="", where="w")
        assert bare == ParsedCall("f", {}, "c", index=2)

    def test_first_present_args_key_wins(self) -> None:
        made = make({"name": "f", "parameters": {"p": 1}, "arguments": {"a": 1}})
        assert made == ParsedCall("f", {"a": 1}, "c")
        assert make({"name": "f", "arguments": None}) == ParsedCall("f", {}, "c")

    def test_any_mapping_is_an_object(self) -> None:
        made = make(MappingProxyType({"name": "f", "arguments": MappingProxyType({"x": 1})}))
        assert made == ParsedCall("f", {"x": 1}, "c")

    def test_custom_keys(self) -> None:
        made = make({"tool": "f", "args": '{"x": 1}'}, name_key="tool", args_keys=("args",))
        assert made == ParsedCall("f", {"x": 1}, "c")

    @pytest.mark.parametrize(
        ("obj", "message", "tool"),
        [
            (
                [1],
                'expected a JSON object {"name": "tool_name", "arguments": {...}} in <tool_call>, got array',
                None,
            ),
            (
                {"arguments": {}},
                'missing "name" in <tool_call>; write {"name": "tool_name", "arguments": {...}}',
                None,
            ),
            ({"name": 3}, '"name" in <tool_call> must be a non-empty string, got number 3', None),
            ({"name": ""}, '"name" in <tool_call> must be a non-empty string, got string ""', None),
            (
                {"name": "f", "arguments": [1]},
                '"arguments" in <tool_call> must be a JSON object, got array; '
                'write the arguments as a JSON object, e.g. {"query": "..."}',
                "f",
            ),
        ],
    )
    def test_malformed_objects(self, obj: object, message: str, tool: str | None) -> None:
        made = make(obj, index=3, call_id="call_3", raw="x" * 300)
        assert isinstance(made, MalformedCall)
        assert (made.message, made.tool, made.call_id, made.index) == (message, tool, "call_3", 3)
        assert made.raw == "x" * 197 + "..."

    def test_custom_keys_in_messages(self) -> None:
        made = make({}, name_key="tool", args_keys=("args",), where="tools[0]")
        assert isinstance(made, MalformedCall)
        assert made.message == 'missing "tool" in tools[0]; write {"tool": "tool_name", "args": {...}}'


class TestNewCall:
    def test_is_the_call_the_constructor_makes(self) -> None:
        made = new_call("f", {"x": 1}, "c", 2, "raw")
        expected = ParsedCall("f", {"x": 1}, "c", index=2, raw="raw")
        assert type(made) is ParsedCall
        assert (made, repr(made), vars(made)) == (expected, repr(expected), vars(expected))
        assert dataclasses.replace(made, index=3) == dataclasses.replace(expected, index=3)
        assert pickle.loads(pickle.dumps(made)) == expected

    def test_stays_frozen(self) -> None:
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'tool'"):
            new_call("f", {}, "c", 0, "").tool = "g"  # type: ignore[misc]

    def test_fast_path_is_on(self) -> None:
        # A field, __post_init__ or slots added to ParsedCall make new_call use the constructor.
        assert _calls._FILL_CALLS

    def test_falls_back_to_the_constructor(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(_calls, "_FILL_CALLS", False)
        assert new_call("f", {}, "c", 1, "r") == ParsedCall("f", {}, "c", index=1, raw="r")


class TestBuildResult:
    def test_splits_sites_in_order(self) -> None:
        a, b = ParsedCall("a", {}, "c0"), ParsedCall("b", {}, "c2", index=2)
        bad = MalformedCall("bad", "c1", index=1)
        assert build_result("t", [a, bad, b]) == ParseResult(text="t", calls=(a, b), errors=(bad,))
        assert build_result("t", [a]) == ParseResult(text="t", calls=(a,))
        assert build_result("", []) == ParseResult(text="")
