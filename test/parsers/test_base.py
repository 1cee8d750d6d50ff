"""Tests for the shared parser helpers and the contract every parser keeps."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from torchrl_agentic import parsers
from torchrl_agentic.parsers.base import (
    ToolCallParser,
    default_call_id,
    mask_reasoning,
    message_content,
    reasoning_spans,
    remove_spans,
    render_tool_message,
    truncate,
)
from torchrl_agentic.schema import openai_schema
from torchrl_agentic.tool import Tool
from torchrl_agentic.types import MalformedCall, ParsedCall, ToolResult

from .strategies import SearchTool

PARSERS = [
    parsers.HermesParser(),
    parsers.XMLParser(),
    parsers.JSONBlockParser(),
    parsers.OpenAIParser(),
]




class _Clock(Tool):
    name = "clock.now"
    description = 'The time, with "quotes" and ünicode.'
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}


class TestReasoningSpans:
    def test_no_reasoning(self) -> None:
        assert reasoning_spans("plain <thinking> text") == []

    def test_closed_pairs(self) -> None:
        text = "a<think>b</think>c<think>d</think>e"
        assert [text[s:e] for s, e in reasoning_spans(text)] == [
            "<think>b</think>",
            "<think>d</think>",
        ]

    def test_leading_close_without_open_is_reasoning(self) -> None:
        text = "plan</think>answer<think>x</think>"
        assert [text[s:e] for s, e in reasoning_spans(text)] == [
            "plan</think>",
            "<think>x</think>",
        ]

    def test_unclosed_open_runs_to_end(self) -> None:
        text = "a<think>b</think>c<think>never closed"
        assert reasoning_spans(text)[-1] == (text.index("<think>never"), len(text))

    def test_stray_close_after_a_pair_is_not_reasoning(self) -> None:
        text = "<think>a</think>b</think>c"
        assert reasoning_spans(text) == [(0, len("<think>a</think>"))]


class TestMaskReasoning:
    def test_keeps_length_and_outside_text(self) -> None:
        text = "x<think>secret</think>y"
        masked = mask_reasoning(text)
        assert len(masked) == len(text)
        assert masked == "x" + " " * len("<think>secret</think>") + "y"

    def test_without_reasoning_is_identity(self) -> None:
        assert mask_reasoning("no reasoning") == "no reasoning"


class TestRemoveSpans:
    def test_removes_spans_and_trims(self) -> None:
        assert remove_spans("  a[x]b[y]c  ", [(3, 6), (7, 10)]) == "abc"

    def test_collapses_blank_runs_left_by_removal(self) -> None:
        assert remove_spans("a\n\nCALL\n\nb", [(3, 7)]) == "a\n\nb"

    def test_no_spans_only_trims(self) -> None:
        assert remove_spans(" a\n\n\n\nb ", []) == "a\n\n\n\nb"


class TestMessageContent:
    @pytest.mark.parametrize(
        ("message", "expected"),
        [
            ("text", "text"),
            ({"role": "assistant", "content": "hi"}, "hi"),
            ({"role": "assistant", "content": None}, ""),
            ({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, ""),
            ({"role": "assistant"}, ""),
            (None, ""),
            (42, ""),
        ],
    )
    def test_content(self, message: Any, expected: str) -> None:
        assert message_content(message) == expected


class TestSmallHelpers:
    def test_default_call_id_is_positional(self) -> None:
        assert [default_call_id(i) for i in range(3)] == ["call_0", "call_1", "call_2"]

    def test_truncate(self) -> None:
        assert truncate("abc", 5) == "abc"
        assert truncate("abcdefgh", 5) == "ab..."

    def test_render_tool_message_of_malformed_call_without_tool(self) -> None:
        message = render_tool_message(MalformedCall("bad", "call_3"), ToolResult.error("bad"))
        assert message == {"role": "tool", "content": "bad", "tool_call_id": "call_3", "name": ""}


FORMATS = ("hermes", "jsonblock", "openai", "xml")


def parser_imports(module: str) -> set[str]:
    """The ``torchrl_agentic.parsers`` modules that ``parsers/<module>.py`` imports."""
    tree = ast.parse((Path(parsers.__file__).parent / f"{module}.py").read_text())
    names = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    prefix = "torchrl_agentic.parsers."
    return {name.removeprefix(prefix) for name in names if name.startswith(prefix)}


class TestParsersPackage:
    def test_every_format_module_is_checked(self) -> None:
        modules = {path.stem for path in Path(parsers.__file__).parent.glob("*.py")}
        assert modules - {"__init__", "base", "_calls", "_tagged"} == set(FORMATS)

    @pytest.mark.parametrize("module", FORMATS)
    def test_format_modules_import_only_shared_modules(self, module: str) -> None:
        assert parser_imports(module) - {"base", "_calls", "_tagged"} == set()

    @pytest.mark.parametrize("module", ["base", "_calls", "_tagged"])
    def test_shared_modules_import_no_format(self, module: str) -> None:
        assert parser_imports(module) & set(FORMATS) == set()

    def test_all_is_sorted_and_complete(self) -> None:
        assert parsers.__all__ == sorted(parsers.__all__)
        assert all(hasattr(parsers, name) for name in parsers.__all__)
        exported = {type(p).__name__ for p in PARSERS} | {"ToolCallParser"}
        assert set(parsers.__all__) == exported


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: type(p).__name__)
class TestToolCallParser:
    def test_is_a_tool_call_parser(self, parser: ToolCallParser) -> None:
        assert isinstance(parser, ToolCallParser)

    def test_render_result_shape(self, parser: ToolCallParser) -> None:
        call = ParsedCall("search", {"query": "x"}, "call_7")
        message = parser.render_result(call, ToolResult.from_json({"hits": 2}))
        assert message == {
            "role": "tool",
            "content": '{"hits": 2}',
            "tool_call_id": "call_7",
            "name": "search",
        }

    def test_render_result_of_malformed_call(self, parser: ToolCallParser) -> None:
        call = MalformedCall("missing name", "call_1", tool="search")
        message = parser.render_result(call, ToolResult.error("missing name"))
        assert (message["tool_call_id"], message["name"]) == ("call_1", "search")
        assert message["content"] == "missing name"

    def test_render_tools_lists_every_schema(self, parser: ToolCallParser) -> None:
        block = parser.render_tools([SearchTool(), _Clock()])
        assert "search" in block and "clock.now" in block
        schemas = [
            json.loads(line.rstrip(","))
            for line in block.splitlines()
            if line.startswith('{"type": "function"')
        ]
        assert schemas == [openai_schema(SearchTool()), openai_schema(_Clock())]
