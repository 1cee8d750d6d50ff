"""Tests for the legacy whole-reply JSON parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from torchrl_agentic.parsers.jsonblock import JSONBlockParser
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult

from .strategies import messages, parse_well_formed

parser = JSONBlockParser()


def reply(message: str = "", tools: Any = None) -> str:
    body: dict[str, Any] = {"message": message}
    if tools is not None:
        body["tools"] = tools
    return json.dumps(body)


class TestJSONBlockParser:
    def test_single_call(self) -> None:
        result = parser.parse(reply("Searching.", [{"tool": "search", "args": {"q": "x"}}]))
        assert result.text == "Searching."
        call = result.calls[0]
        assert (call.tool, dict(call.args), call.call_id, call.index) == (
            "search",
            {"q": "x"},
            "call_0",
            0,
        )

    def test_several_calls_with_and_without_tags(self) -> None:
        tools = [{"tool": "a", "args": {}, "tag": "A"}, {"tool": "b", "args": {"i": 2}}]
        result = parser.parse(reply("", tools))
        assert [(c.tool, c.call_id, c.index) for c in result.calls] == [
            ("a", "A", 0),
            ("b", "call_1", 1),
        ]

    def test_order_kept_around_malformed_entries(self) -> None:
        tools = [{"tool": "a"}, 3, {"args": {}}, {"tool": "b", "args": [1]}, {"tool": "c"}]
        ordered = parser.parse(reply("m", tools)).ordered()
        assert [type(c) for c in ordered] == [
            ParsedCall,
            MalformedCall,
            MalformedCall,
            MalformedCall,
            ParsedCall,
        ]
        assert [c.index for c in ordered] == [0, 1, 2, 3, 4]
        assert [c.call_id for c in ordered] == [f"call_{i}" for i in range(5)]
        assert ordered[1].message.startswith('expected a JSON object {"tool": "tool_name"')
        assert ordered[2].message.startswith('missing "tool" in tools[2]')
        assert ordered[3].message.startswith('"args" in tools[3] must be a JSON object, got array')
        assert ordered[3].tool == "b"

    def test_arguments_as_json_string(self) -> None:
        result = parser.parse(reply("", [{"tool": "f", "args": '{"x": 1}'}]))
        assert dict(result.calls[0].args) == {"x": 1}

    def test_arguments_string_that_is_not_an_object(self) -> None:
        result = parser.parse(reply("", [{"tool": "f", "args": "[1]"}]))
        assert result.errors[0].message.startswith('"args" in tools[0] is a string holding')

    def test_fenced_block(self) -> None:
        text = "```json\n" + reply("m", [{"tool": "f"}]) + "\n```"
        result = parser.parse(text)
        assert ([c.tool for c in result.calls], result.text) == (["f"], "m")

    @pytest.mark.parametrize("prefix", ["<think>hmm</think>\n", "hmm</think>"])
    def test_after_closed_reasoning(self, prefix: str) -> None:
        result = parser.parse(prefix + reply("m", [{"tool": "f"}]))
        assert [c.tool for c in result.calls] == ["f"]
        assert result.text == prefix.strip() + "\n\nm"

    @pytest.mark.parametrize(
        "text",
        [
            "<think>" + reply("m", [{"tool": "f"}]) + "</think>",
            reply("m", [{"tool": "f"}]) + "</think>",
            "answer <think>" + reply("m", [{"tool": "f"}]),
        ],
    )
    def test_calls_inside_reasoning_are_ignored(self, text: str) -> None:
        assert parser.parse(text) == ParseResult(text=text)

    @pytest.mark.parametrize(
        "text", ["plain answer", '{"answer": 42}', "[1, 2]", '{"message": "x"', "Sure: " + reply()]
    )
    def test_other_replies_are_plain_text(self, text: str) -> None:
        assert parser.parse(text) == ParseResult(text=text)

    def test_object_without_tools_has_no_calls(self) -> None:
        assert parser.parse(reply("just talking")) == ParseResult(text="just talking")

    def test_tools_that_is_not_a_list(self) -> None:
        result = parser.parse(json.dumps({"message": "m", "tools": {"tool": "f"}}))
        assert result.calls == ()
        assert result.errors[0].message.startswith('"tools" must be a list')

    def test_truncated_reply_is_plain_text(self) -> None:
        text = reply("m", [{"tool": "f"}])[:-5]
        assert parser.parse(text) == ParseResult(text=text)

    def test_dict_messages(self) -> None:
        result = parser.parse({"role": "assistant", "content": reply("m", [{"tool": "f"}])})
        assert ([c.tool for c in result.calls], result.text) == (["f"], "m")
        assert parser.parse({"role": "assistant"}) == ParseResult(text="")

    def test_render_calls_round_trip(self) -> None:
        calls = [ParsedCall("a", {"x": "ü"}, "call_0"), ParsedCall("b", {}, "T", index=1)]
        result = parser.parse(parser.render_calls(calls, message="hello"))
        assert result.text == "hello"
        assert [(c.tool, dict(c.args), c.call_id) for c in result.calls] == [
            ("a", {"x": "ü"}, "call_0"),
            ("b", {}, "T"),
        ]

    def test_render_tools_shows_the_reply_format(self) -> None:
        assert '"tools": [{"tool": "<tool-name>"' in parser.render_tools([])

    @given(messages('{"message": "m", ', '"tools": [', '{"tool": "f"', ', "args": ', "```json\n", "```", "3"))
    def test_never_raises(self, text: str) -> None:
        parse_well_formed(parser, text)

    def test_megabyte_messages(self) -> None:
        tools = [{"tool": "f", "args": {"i": i}} for i in range(30_000)]
        (result,) = parse_well_formed(parser, reply("x" * 100_000, tools))
        assert len(result.calls) == 30_000
        deep = '{"tools": [' + "[" * 500_000
        parse_well_formed(parser, deep, "<think>" * 150_000, "```json\n" + "x" * 1_000_000 + "\n```")
