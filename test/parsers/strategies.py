"""What the parser tests of every format share: fuzz messages and the checks every result passes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hypothesis import strategies as st

from torchrl_agentic.parsers.base import ToolCallParser
from torchrl_agentic.tool import Tool
from torchrl_agentic.types import MalformedCall, ParsedCall, ParseResult

BASE_FRAGMENTS = ("{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "null", "<think>", "</think>")
"""Pieces of JSON and reasoning syntax that every format's fuzz messages are built from."""

WORDS = "word " * 200_000
"""A megabyte of prose, to bury a call in."""


def messages(*fragments: str, max_size: int = 40) -> st.SearchStrategy[str]:
    """Any text, or up to ``max_size`` pieces drawn from ``BASE_FRAGMENTS`` and ``fragments``, joined."""
    pieces = list(dict.fromkeys([*BASE_FRAGMENTS, *fragments]))
    return st.one_of(st.text(), st.lists(st.sampled_from(pieces), max_size=max_size).map("".join))


def assert_well_formed(result: object) -> None:
    """What every parse result keeps, whatever the message.

    A ParseResult of text, ParsedCalls and MalformedCalls, each list in message order, whose call
    sites are numbered 0..n-1 and each carry a non-empty id.
    """
    assert isinstance(result, ParseResult)
    assert isinstance(result.text, str)
    assert all(isinstance(c, ParsedCall) for c in result.calls)
    assert all(isinstance(e, MalformedCall) for e in result.errors)
    ordered = result.ordered()
    assert [c.index for c in ordered] == list(range(len(ordered)))
    for sites in (result.calls, result.errors):
        assert [s.index for s in sites] == sorted(s.index for s in sites)
    for site in ordered:
        assert isinstance(site.call_id, str) and site.call_id
        assert isinstance(site.raw, str)
    for call in result.calls:
        assert isinstance(call.tool, str) and call.tool
        assert isinstance(call.args, Mapping)
    for error in result.errors:
        assert isinstance(error.message, str) and error.message
        assert error.tool is None or isinstance(error.tool, str)


def parse_well_formed(parser: ToolCallParser, *inputs: Any) -> list[ParseResult]:
    """``parser.parse`` of each input, after checking each result with ``assert_well_formed``."""
    results = [parser.parse(message) for message in inputs]
    for result in results:
        assert_well_formed(result)
    return results


class SearchTool(Tool):
    """A tool to advertise in render_tools tests."""

    name = "search"
    description = "Search the web."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"query": {"type": "string"}},
    }
