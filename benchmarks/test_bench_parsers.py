"""Group ``agentic-parsers``: one message through a tool-call parser, beside TorchRL's XMLBlockParser.

Every env step parses the newest message of each batch item, so these run per item per step. Run the
figures with ``pytest benchmarks/test_bench_parsers.py --benchmark-enable``; the test suite runs each once.
"""

from __future__ import annotations

from typing import Any

from torchrl.envs.llm.transforms import XMLBlockParser

from torchrl_agentic.parsers import HermesParser, XMLParser

GROUP = "agentic-parsers"

HERMES_8_CALLS = "".join(
    f'<tool_call>{{"name": "noop", "arguments": {{"i": {i}}}}}</tool_call>' for i in range(8)
)
XML_8_CALLS = "".join(f'<tool name="noop">{{"i": {i}}}</tool>' for i in range(8))
PROSE_2KB = ("The quick brown fox jumps over the lazy dog, then naps in the afternoon sun. " * 27)[:2048]
REASONING_2_CALLS = (
    "<think>The user wants two lookups; I will call noop twice and then answer.</think>\n"
    "Let me check both.\n"
    + "".join(f'<tool_call>{{"name": "noop", "arguments": {{"i": {i}}}}}</tool_call>\n' for i in range(2))
)


def run(benchmark: Any, parse: Any, message: str) -> Any:
    benchmark.group = GROUP
    return benchmark(parse, message)


def test_hermes_8_calls(benchmark):
    result = run(benchmark, HermesParser().parse, HERMES_8_CALLS)
    assert [dict(c.args) for c in result.calls] == [{"i": i} for i in range(8)]
    assert (result.errors, result.text) == ((), "")


def test_hermes_no_calls_2kb_prose(benchmark):
    result = run(benchmark, HermesParser().parse, PROSE_2KB)
    assert (result.calls, result.errors, result.text) == ((), (), PROSE_2KB.strip())


def test_hermes_reasoning_and_2_calls(benchmark):
    result = run(benchmark, HermesParser().parse, REASONING_2_CALLS)
    assert [c.tool for c in result.calls] == ["noop", "noop"]
    assert result.text.startswith("<think>") and result.text.endswith("Let me check both.")


def test_xml_8_calls(benchmark):
    result = run(benchmark, XMLParser().parse, XML_8_CALLS)
    assert [dict(c.args) for c in result.calls] == [{"i": i} for i in range(8)]
    assert (result.errors, result.text) == ((), "")


def test_legacy_xmlblockparser_8_calls(benchmark):
    result = run(benchmark, XMLBlockParser(), XML_8_CALLS)
    assert [c.args for c in result["calls"]] == [{"i": i} for i in range(8)]
