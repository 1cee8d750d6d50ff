"""``ToolSet``: tools held by name, in order, with the container protocol ToolCompose exposes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Self

from torchrl_agentic.schema import openai_schema
from torchrl_agentic.tool import Tool


def check_tool(tool: object, existing: Mapping[str, Tool]) -> None:
    """``TypeError`` unless ``tool`` is a usable Tool, ``ValueError`` if its name is taken."""
    if not isinstance(tool, Tool):
        raise TypeError(
            f"ToolCompose holds Tool objects, got {type(tool).__name__}; subclass "
            "torchrl_agentic.Tool. To add a TorchRL transform "
            "after the tools, use TransformedEnv(env, Compose(tool_compose, transform))"
        )
    tool.check()
    if tool.name in existing:
        raise ValueError(
            f"duplicate tool name {tool.name!r}: {existing[tool.name]!r} already has it; "
            "give each tool a unique name"
        )


class ToolSet:
    """Tools by unique name, in insertion order: ``ts["python"]``, ``"python" in ts``, ``ts[0]``.

    Inserting a non-Tool is a ``TypeError``, a taken name a ``ValueError``; both say the fix.
    """

    _tools: dict[str, Tool]

    @property
    def tools(self) -> list[Tool]:
        """The tools, in insertion order."""
        return list(self._tools.values())

    def append(self, tool: Tool) -> Self:
        """Add ``tool``; ``TypeError`` for a non-Tool, ``ValueError`` for a duplicate name."""
        return self.insert(len(self._tools), tool)

    def insert(self, index: int, tool: Tool) -> Self:
        """Insert ``tool`` at position ``index``."""
        check_tool(tool, self._tools)
        items = list(self._tools.items())
        items.insert(index, (tool.name, tool))
        self._tools = dict(items)
        return self

    def __setitem__(self, key: int | str, tool: Tool) -> None:
        names = list(self._tools)
        if isinstance(key, str):
            if key not in self._tools:
                raise KeyError(f"no tool named {key!r}; use append() to add one")
            index = names.index(key)
        else:
            index = range(len(names))[key]
        others = {n: t for n, t in self._tools.items() if n != names[index]}
        check_tool(tool, others)
        if isinstance(key, str) and tool.name != key:
            raise ValueError(
                f"compose[{key!r}] = tool needs tool.name == {key!r}, got {tool.name!r}; "
                "use append() to add a tool under its own name"
            )
        items = list(self._tools.items())
        items[index] = (tool.name, tool)
        self._tools = dict(items)

    def __getitem__(self, key: int | str) -> Tool:
        if isinstance(key, str):
            try:
                return self._tools[key]
            except KeyError:
                raise KeyError(
                    f"no tool named {key!r}; available tools: {', '.join(self._tools) or '(none)'}"
                ) from None
        return list(self._tools.values())[key]

    def __delitem__(self, key: int | str) -> None:
        del self._tools[self[key].name]

    def pop(self, index: int | None = None) -> Tool:
        tool = self[-1 if index is None else index]
        del self._tools[tool.name]
        return tool

    def __contains__(self, name: object) -> bool:
        if isinstance(name, Tool):
            return self._tools.get(name.name) is name
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-format function specs of the tools (what a chat template's ``tools=`` takes)."""
        return [openai_schema(tool) for tool in self._tools.values()]
