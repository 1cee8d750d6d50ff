"""The ``Tool`` base class (``check``, ``clone``, defaults) and the built-in ``StopTool``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from torchrl_agentic import StopSignal, StopTool, Tool, ToolContext, ToolResult


class Good(Tool):
    name = "good"
    description = "A usable tool."
    input_schema = {"type": "object", "properties": {"x": {"type": "integer"}}}

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.from_text("ok")


def tool(**attrs: Any) -> Tool:
    """A ``Good`` with some class attributes replaced."""
    return type("Custom", (Good,), attrs)()


def ctx() -> ToolContext:
    return ToolContext(call_id="call_0", batch_index=0, tool="stop")


class TestCheck:
    @pytest.mark.parametrize(
        "name", ["good", "_private", "a", "a" * 64, "name.with-dots_and-dashes", "Tool2"]
    )
    def test_good_names_pass(self, name):
        tool(name=name).check()

    @pytest.mark.parametrize(
        "name", ["", "my tool", " lead", "a" * 65, "1starts_with_digit", "semi;colon", "ünïcode"]
    )
    def test_bad_names_raise(self, name):
        with pytest.raises(ValueError, match=r"Custom\.name must match .*at most 64 characters"):
            tool(name=name).check()

    def test_bad_name_message_shows_value_and_fix(self):
        with pytest.raises(ValueError, match=r"got 'my tool'; set a class attribute `name = "):
            tool(name="my tool").check()

    def test_non_str_name_raises(self):
        with pytest.raises(ValueError, match=r"Custom\.name must match .* got 3"):
            tool(name=3).check()

    def test_name_with_trailing_newline_raises(self):
        with pytest.raises(ValueError, match="name must match"):
            tool(name="search\n").check()

    @pytest.mark.parametrize(
        ("description", "kind"), [(None, "NoneType"), (5, "int"), (["x"], "list")]
    )
    def test_non_str_description_raises(self, description, kind):
        with pytest.raises(TypeError, match=rf"Custom\.description must be a str, got {kind}"):
            tool(description=description).check()

    def test_non_mapping_schema_raises(self):
        match = r"Custom\.input_schema must be a JSON Schema dict, got list"
        with pytest.raises(TypeError, match=match):
            tool(input_schema=[{"type": "object"}]).check()

    def test_non_object_schema_raises(self):
        match = r"input_schema must describe an object.*got type 'string'"
        with pytest.raises(ValueError, match=match):
            tool(input_schema={"type": "string"}).check()

    def test_invalid_json_schema_raises(self):
        schema = {"type": "object", "properties": {"x": {"type": "integr"}}}
        with pytest.raises(ValueError, match=r"Custom\.input_schema is not a valid JSON Schema: "):
            tool(input_schema=schema).check()

    def test_missing_run_raises(self):
        class NoRun(Tool):
            name = "norun"
            description = "Forgot run."

        match = r"NoRun must define `async def run\(self, args, ctx\)`"
        with pytest.raises(TypeError, match=match):
            NoRun().check()

    def test_sync_run_raises(self):
        class Sync(Tool):
            name = "sync"
            description = "Not async."

            def run(self, args: Mapping[str, Any], ctx: ToolContext) -> Any:  # type: ignore[override]
                return "x"

        with pytest.raises(TypeError, match="async def run"):
            Sync().check()

    def test_good_tool_passes(self):
        assert Good().check() is None
        StopTool().check()


class TestTool:
    def test_base_run_raises_not_implemented(self):
        with pytest.raises(NotImplementedError, match=r"Tool must define `async def run"):
            asyncio.run(Tool().run({}, ctx()))

    def test_defaults(self):
        base = Tool()
        assert base.exclusive is False and base.wants_state is False
        assert base.input_schema == {"type": "object"} and base.output_schema is None
        assert asyncio.run(base.setup()) is None and asyncio.run(base.teardown()) is None

    def test_clone_is_a_distinct_equal_copy(self):
        original = Good()
        original.extra = ["shared"]
        copy = original.clone()
        assert copy is not original and type(copy) is Good
        assert copy.name == original.name and copy.extra == ["shared"]
        copy.name = "renamed"
        assert original.name == "good"

    def test_repr(self):
        assert repr(Good()) == "Good(name='good')"


class TestStopTool:
    def test_raises_stop_signal_with_reason(self):
        with pytest.raises(StopSignal, match="task complete") as info:
            asyncio.run(StopTool().run({"reason": "task complete"}, ctx()))
        assert info.value.reason == "task complete"

    def test_reason_is_optional(self):
        with pytest.raises(StopSignal) as info:
            asyncio.run(StopTool().run({}, ctx()))
        assert info.value.reason == ""

    def test_schema(self):
        stop = StopTool()
        assert stop.name == "stop"
        assert stop.input_schema["additionalProperties"] is False
        assert set(stop.input_schema["properties"]) == {"reason"}
