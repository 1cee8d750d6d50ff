"""Tests for the Hermes/Qwen ``<tool_call>`` parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from torchrl_agentic.parsers.hermes import HermesParser
from torchrl_agentic.schema import openai_schema
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult

from .strategies import WORDS, SearchTool, messages, parse_well_formed

parser = HermesParser()


def tc(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


def call(name: str, args: Any) -> str:
    return tc(json.dumps({"name": name, "arguments": args}))




class TestHermesParser:
    def test_single_call(self) -> None:
        result = parser.parse(
            'Let me check.\n<tool_call>\n{"name": "search", '
            '"arguments": {"query": "x"}}\n</tool_call>'
        )
        assert result.text == "Let me check."
        assert result.calls == (
            ParsedCall("search", {"query": "x"}, "call_0", raw=result.calls[0].raw),
        )
        assert result.calls[0].raw.startswith("<tool_call>")
        assert result.errors == ()

    def test_several_calls(self) -> None:
        result = parser.parse(call("a", {"i": 1}) + "\nand\n" + call("b", {"i": 2}))
        assert [(c.tool, dict(c.args), c.call_id, c.index) for c in result.calls] == [
            ("a", {"i": 1}, "call_0", 0),
            ("b", {"i": 2}, "call_1", 1),
        ]
        assert result.text == "and"

    def test_order_kept_around_a_malformed_call(self) -> None:
        text = call("a", {}) + tc('{"name": "b", "arguments": {"x": 1,}}') + call("c", {})
        result = parser.parse(text)
        ordered = result.ordered()
        assert [type(c) for c in ordered] == [ParsedCall, MalformedCall, ParsedCall]
        assert [c.index for c in ordered] == [0, 1, 2]
        assert [c.call_id for c in ordered] == ["call_0", "call_1", "call_2"]
        assert [c.tool for c in result.calls] == ["a", "c"]
        assert result.errors[0].message == (
            "invalid JSON in <tool_call>: Expecting property name enclosed in double quotes "
            "at char 35"
        )

    def test_arguments_as_json_string(self) -> None:
        result = parser.parse(tc(json.dumps({"name": "f", "arguments": '{"x": [1, 2]}'})))
        assert dict(result.calls[0].args) == {"x": [1, 2]}

    def test_parameters_key(self) -> None:
        result = parser.parse(tc('{"name": "f", "parameters": {"x": 1}}'))
        assert dict(result.calls[0].args) == {"x": 1}

    def test_missing_arguments_are_empty(self) -> None:
        assert dict(parser.parse(tc('{"name": "f"}')).calls[0].args) == {}

    def test_close_tag_inside_json_string(self) -> None:
        code = "print('</tool_call>')"
        result = parser.parse(call("python", {"code": code}) + " done")
        assert result.errors == ()
        assert dict(result.calls[0].args) == {"code": code}
        assert result.text == "done"

    def test_unclosed_call_at_end(self) -> None:
        result = parser.parse('ok <tool_call>{"name": "f", "arguments": {"x": 1}}')
        assert result.calls == ()
        error = result.errors[0]
        assert error.message == "unclosed <tool_call>: the message ended before </tool_call>"
        assert (error.tool, error.call_id, error.index) == ("f", "call_0", 0)
        assert result.text == "ok"

    def test_truncated_json(self) -> None:
        result = parser.parse('<tool_call>{"name": "f", "arguments": {"x": "abc')
        assert result.errors[0].message.startswith("unclosed <tool_call>")
        assert "Unterminated string starting at char 33" in result.errors[0].message

    def test_invalid_json_is_cut_at_next_close_tag(self) -> None:
        result = parser.parse(tc("{name: f}") + call("g", {}))
        assert result.errors[0].message.startswith("invalid JSON in <tool_call>")
        assert result.errors[0].raw == tc("{name: f}")
        assert [(c.tool, c.index) for c in result.calls] == [("g", 1)]

    def test_missing_name(self) -> None:
        result = parser.parse(tc('{"arguments": {}}'))
        assert result.errors[0].message.startswith('missing "name" in <tool_call>')

    @pytest.mark.parametrize("args", ["[1, 2]", '"[1]"', "3", '"not json"'])
    def test_non_object_arguments(self, args: str) -> None:
        result = parser.parse(tc(f'{{"name": "f", "arguments": {args}}}'))
        assert result.calls == ()
        assert result.errors[0].message.startswith('"arguments" in <tool_call>')
        assert result.errors[0].tool == "f"

    def test_non_object_call(self) -> None:
        result = parser.parse(tc("[1]"))
        assert result.errors[0].message.startswith("expected a JSON object")

    def test_text_after_json(self) -> None:
        result = parser.parse(tc('{"name": "f"} oops'))
        assert result.errors[0].message.startswith("unexpected text after the JSON value")

    @pytest.mark.parametrize(
        "text",
        [
            "<think>" + call("f", {}) + "</think>answer",
            "plan " + call("f", {}) + "</think>answer",
            "answer <think>" + call("f", {}),
        ],
    )
    def test_calls_inside_reasoning_are_ignored(self, text: str) -> None:
        result = parser.parse(text)
        assert (result.calls, result.errors) == ((), ())
        assert result.text == text

    def test_call_after_reasoning_is_found_and_reasoning_kept(self) -> None:
        text = "<think>" + call("f", {}) + "</think>\n" + call("g", {})
        result = parser.parse(text)
        assert [c.tool for c in result.calls] == ["g"]
        assert result.text == "<think>" + call("f", {}) + "</think>"

    def test_think_tag_inside_json_string(self) -> None:
        result = parser.parse(call("f", {"s": "<think>"}) + " after")
        assert dict(result.calls[0].args) == {"s": "<think>"}

    def test_dict_messages(self) -> None:
        message = {"role": "assistant", "content": call("f", {"x": 1}) + " hi"}
        result = parser.parse(message)
        assert ([c.tool for c in result.calls], result.text) == (["f"], "hi")
        assert parser.parse({"role": "assistant", "content": None}) == ParseResult(text="")

    def test_render_call_round_trip(self) -> None:
        original = ParsedCall("search", {"query": "</tool_call> ü", "n": [1, {"a": None}]}, "c")
        rendered = parser.render_call(original)
        assert rendered.startswith("<tool_call>\n") and rendered.endswith("\n</tool_call>")
        back = parser.parse(rendered).calls[0]
        assert (back.tool, dict(back.args)) == (original.tool, dict(original.args))

    def test_render_tools_is_the_qwen_block(self) -> None:
        block = parser.render_tools([SearchTool()])
        assert block.startswith("# Tools\n\nYou may call one or more functions")
        assert f"<tools>\n{json.dumps(openai_schema(SearchTool()))}\n</tools>" in block
        assert block.endswith(
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )

    @given(
        messages(
            "<tool_call>",
            "</tool_call>",
            '"name"',
            '"f"',
            '"arguments"',
            "a",
            '{"name": "f", "arguments": {}}',
        )
    )
    def test_never_raises(self, text: str) -> None:
        parse_well_formed(parser, text)

    def test_megabyte_messages(self) -> None:
        (result,) = parse_well_formed(parser, WORDS + call("f", {"data": "x" * 100_000}))
        assert [c.tool for c in result.calls] == ["f"]
        parse_well_formed(
            parser,
            "<tool_call>{" * 90_000,
            "<tool_call>" + "[" * 1_000_000,
            tc('{"a": "') * 60_000,
            "<think>" * 150_000 + call("f", {}),
        )
