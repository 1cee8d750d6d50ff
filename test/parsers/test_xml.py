"""Tests for the legacy ``<tool name="...">`` block parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from torchrl_agentic.parsers.xml import XMLParser
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult

from .strategies import WORDS, messages, parse_well_formed

parser = XMLParser()


def block(name: str, args: Any, tag: str | None = None) -> str:
    tag_attr = f' tag="{tag}"' if tag else ""
    return f'<tool name="{name}"{tag_attr}>{json.dumps(args)}</tool>'


class TestXMLParser:
    def test_single_call_with_tag(self) -> None:
        result = parser.parse('<tool name="search" tag="A">{"query": "torchrl"}</tool>\nSome text.')
        assert result.text == "Some text."
        call = result.calls[0]
        assert (call.tool, dict(call.args), call.call_id, call.index) == (
            "search",
            {"query": "torchrl"},
            "A",
            0,
        )
        assert call.raw == '<tool name="search" tag="A">{"query": "torchrl"}</tool>'

    def test_several_calls_without_tags_get_positional_ids(self) -> None:
        result = parser.parse(block("a", {"i": 1}) + " mid " + block("b", {"i": 2}))
        assert [(c.tool, dict(c.args), c.call_id) for c in result.calls] == [
            ("a", {"i": 1}, "call_0"),
            ("b", {"i": 2}, "call_1"),
        ]
        assert result.text == "mid"

    def test_attributes_in_any_order_and_blank_around_body(self) -> None:
        result = parser.parse('<tool tag="T"  name="n" >\n {"x": 1}\n</tool>')
        assert (result.calls[0].tool, result.calls[0].call_id) == ("n", "T")

    def test_order_kept_around_a_malformed_call(self) -> None:
        text = block("a", {}) + '<tool name="b">not json</tool>' + block("c", {}, tag="C")
        ordered = parser.parse(text).ordered()
        assert [type(c) for c in ordered] == [ParsedCall, MalformedCall, ParsedCall]
        assert [c.index for c in ordered] == [0, 1, 2]
        assert [c.call_id for c in ordered] == ["call_0", "call_1", "C"]
        assert ordered[1].message == "invalid JSON in <tool>: Expecting value at char 0"
        assert ordered[1].tool == "b"

    @pytest.mark.parametrize("body", ["", "  \n "])
    def test_empty_body_means_no_arguments(self, body: str) -> None:
        result = parser.parse(f'<tool name="now">{body}</tool>')
        assert result.calls == (ParsedCall("now", {}, "call_0", raw=result.calls[0].raw),)

    def test_arguments_as_json_string(self) -> None:
        result = parser.parse('<tool name="f">"{\\"x\\": 1}"</tool>')
        assert dict(result.calls[0].args) == {"x": 1}

    @pytest.mark.parametrize("body", ["[1]", "null", "3", '"[1]"'])
    def test_non_object_body(self, body: str) -> None:
        result = parser.parse(f'<tool name="f">{body}</tool>')
        assert result.calls == ()
        assert result.errors[0].message.startswith("the body of <tool> ")

    def test_close_tag_inside_json_string(self) -> None:
        result = parser.parse(block("echo", {"s": "</tool>"}) + " after")
        assert dict(result.calls[0].args) == {"s": "</tool>"}
        assert result.text == "after"

    def test_unclosed_block_at_end(self) -> None:
        result = parser.parse('ok <tool name="f">{"x": 1}')
        assert result.errors[0].message == "unclosed <tool>: the message ended before </tool>"
        assert (result.errors[0].tool, result.text) == ("f", "ok")

    def test_truncated_json(self) -> None:
        result = parser.parse('<tool name="f">{"x": "ab')
        assert result.errors[0].message.startswith("unclosed <tool>")
        assert "Unterminated string starting at char 6" in result.errors[0].message

    def test_missing_name(self) -> None:
        result = parser.parse('<tool tag="A">{}</tool>')
        assert result.errors[0].message.startswith('missing "name" attribute in <tool>')
        assert result.errors[0].call_id == "A"

    def test_malformed_opening_tag_with_a_close_tag(self) -> None:
        result = parser.parse("<tool name=f>{}</tool> after")
        assert result.errors[0].message.startswith("malformed <tool> opening tag")
        assert result.text == "after"

    @pytest.mark.parametrize("text", ["a <tool for cutting", "<tools>[]</tools>", "<tool_call>"])
    def test_prose_and_other_tags_are_not_calls(self, text: str) -> None:
        assert parser.parse(text) == ParseResult(text=text)

    @pytest.mark.parametrize(
        "text",
        [
            "<think>" + block("f", {}) + "</think>answer",
            "plan " + block("f", {}) + "</think>answer",
            "answer <think>" + block("f", {}),
        ],
    )
    def test_calls_inside_reasoning_are_ignored(self, text: str) -> None:
        assert parser.parse(text) == ParseResult(text=text)

    def test_dict_messages(self) -> None:
        result = parser.parse({"role": "assistant", "content": block("f", {"x": 1}) + " hi"})
        assert ([c.tool for c in result.calls], result.text) == (["f"], "hi")
        assert parser.parse({"role": "assistant", "content": 7}) == ParseResult(text="")

    def test_render_call_round_trip(self) -> None:
        original = ParsedCall("search", {"q": "</tool> ü", "n": [1, None]}, "T1")
        back = parser.parse(parser.render_call(original)).calls[0]
        assert (back.tool, dict(back.args), back.call_id) == ("search", dict(original.args), "T1")

    def test_render_call_drops_a_tag_that_cannot_be_an_attribute(self) -> None:
        rendered = parser.render_call(ParsedCall("f", {}, 'a"b'))
        assert rendered == '<tool name="f">{}</tool>'

    def test_render_tools_shows_the_call_syntax(self) -> None:
        assert '<tool name="tool_name" tag="optional_id">' in parser.render_tools([])

    @given(messages('<tool name="f">', '<tool tag="t">', "<tool ", "</tool>", ">", "=", '{"x": 1}'))
    def test_never_raises(self, text: str) -> None:
        parse_well_formed(parser, text)

    def test_megabyte_messages(self) -> None:
        (result,) = parse_well_formed(parser, WORDS + block("f", {"data": "x" * 100_000}))
        assert [c.tool for c in result.calls] == ["f"]
        parse_well_formed(
            parser,
            "<tool name=x>" * 80_000,
            '<tool name="a">{"a": "</tool>' * 40_000,
            "<tool " + " " * 1_000_000,
            '<tool name="' + "x" * 1_000_000,
        )
