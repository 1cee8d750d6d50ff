"""Tests for the structured ``tool_calls`` parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchrl_agentic.parsers.openai import OpenAIParser
from torchrl_agentic.schema import openai_schema
from torchrl_agentic.types import MalformedCall, ParsedCall

from .strategies import WORDS, SearchTool, messages, parse_well_formed

parser = OpenAIParser()


def nested(name: str, arguments: Any, call_id: str = "id_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*tool_calls: Any, content: Any = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(tool_calls)}




class TestOpenAIParser:
    def test_single_openai_call_keeps_its_id(self) -> None:
        result = parser.parse(assistant(nested("search", '{"q": "x"}', "call_abc"), content=" hi "))
        assert result.text == "hi"
        call = result.calls[0]
        assert (call.tool, dict(call.args), call.call_id, call.index) == (
            "search",
            {"q": "x"},
            "call_abc",
            0,
        )

    def test_flat_history_entries_get_positional_ids(self) -> None:
        result = parser.parse(
            assistant({"name": "a", "arguments": {"i": 1}}, {"name": "b", "arguments": {"i": 2}})
        )
        assert [(c.tool, dict(c.args), c.call_id) for c in result.calls] == [
            ("a", {"i": 1}, "call_0"),
            ("b", {"i": 2}, "call_1"),
        ]

    def test_arguments_as_object_or_blank(self) -> None:
        result = parser.parse(assistant(nested("a", {"x": 1}), nested("b", ""), {"name": "c"}))
        assert [dict(c.args) for c in result.calls] == [{"x": 1}, {}, {}]

    def test_order_kept_around_malformed_entries(self) -> None:
        entries = [
            nested("a", "{}", "A"),
            "not a call",
            {"function": {"arguments": "{}"}},
            nested("d", "[1, 2]", "D"),
            {"name": "e", "arguments": "{bad"},
            {"function": "f"},
            nested("g", "{}", "G"),
        ]
        ordered = parser.parse(assistant(*entries)).ordered()
        assert [type(c) for c in ordered] == [ParsedCall] + [MalformedCall] * 5 + [ParsedCall]
        assert [c.index for c in ordered] == list(range(7))
        assert [c.call_id for c in ordered] == [
            "A",
            "call_1",
            "call_2",
            "D",
            "call_4",
            "call_5",
            "G",
        ]
        messages = [c.message for c in ordered if isinstance(c, MalformedCall)]
        assert messages[0].startswith("expected a JSON object") and "tool_calls[1]" in messages[0]
        assert messages[1].startswith('missing "name" in tool_calls[2].function')
        assert messages[2].startswith(
            '"arguments" in tool_calls[3].function is a string holding a JSON array'
        )
        assert messages[3].startswith(
            '"arguments" in tool_calls[4] is a string that is not valid JSON'
        )
        assert "tool_calls[5].function" in messages[4]
        assert ordered[3].tool == "d"

    @pytest.mark.parametrize("arguments", [[1], 3, True])
    def test_non_object_arguments(self, arguments: Any) -> None:
        result = parser.parse(assistant(nested("f", arguments)))
        assert result.calls == ()
        assert "must be a JSON object" in result.errors[0].message

    def test_tool_calls_that_is_not_a_list(self) -> None:
        result = parser.parse({"role": "assistant", "content": "", "tool_calls": {"name": "f"}})
        assert result.errors[0].message == '"tool_calls" must be a list of calls, got object'

    @pytest.mark.parametrize(
        "message",
        [
            '<tool_call>{"name": "f"}</tool_call>',
            {"role": "assistant", "content": "x"},
            {"role": "assistant", "content": "x", "tool_calls": None},
            {"role": "assistant", "content": "x", "tool_calls": []},
        ],
    )
    def test_no_tool_calls(self, message: Any) -> None:
        result = parser.parse(message)
        assert (result.calls, result.errors) == ((), ())
        assert result.text == (message if isinstance(message, str) else "x")

    def test_content_is_not_scanned_and_odd_content_is_empty(self) -> None:
        result = parser.parse(assistant(nested("f", "{}"), content=None))
        assert (result.text, [c.tool for c in result.calls]) == ("", ["f"])

    def test_render_call_round_trip(self) -> None:
        original = ParsedCall("search", {"q": "ü", "n": [1, None]}, "call_x")
        rendered = parser.render_call(original)
        assert rendered["type"] == "function"
        assert isinstance(rendered["function"]["arguments"], str)
        back = parser.parse(assistant(rendered)).calls[0]
        assert (back.tool, dict(back.args), back.call_id) == (
            "search",
            dict(original.args),
            "call_x",
        )

    def test_render_tools_is_a_json_list(self) -> None:
        assert json.loads(parser.render_tools([SearchTool()])) == [openai_schema(SearchTool())]
        assert json.loads(parser.render_tools([])) == []

    @given(
        messages("<tool_call>", "</tool_call>"),
        st.lists(
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(
                        st.sampled_from(["id", "type", "function", "name", "arguments", "x"]),
                        inner,
                        max_size=4,
                    )
                ),
                max_leaves=10,
            ),
            max_size=4,
        ),
    )
    def test_never_raises(self, content: str, tool_calls: list[Any]) -> None:
        parse_well_formed(parser, content, assistant(*tool_calls, content=content))

    def test_megabyte_messages(self) -> None:
        big = nested("f", json.dumps({"data": "x" * 1_000_000}))
        (result,) = parse_well_formed(parser, assistant(big, content=WORDS))
        assert [c.tool for c in result.calls] == ["f"]
        (hostile,) = parse_well_formed(parser, assistant(*[nested("f", "{" * 100) for _ in range(10_000)]))
        assert len(hostile.errors) == 10_000
