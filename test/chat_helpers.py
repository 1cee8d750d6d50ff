"""Helpers shared by the env-level tests: Hermes call text and reset tensordicts."""

from __future__ import annotations

import json
from typing import Any

from tensordict import TensorDict


def hermes(name: str, **args: Any) -> str:
    """A Hermes tool call as the model writes it."""
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(args)}}}</tool_call>'


def queries(shape: tuple[int, ...]) -> TensorDict:
    """A reset tensordict with one query per item."""
    count = 1
    for s in shape:
        count *= s
    flat = [f"question {i}" for i in range(count)]
    nested: Any = flat
    for size in reversed(shape[1:]):
        nested = [nested[i : i + size] for i in range(0, len(nested), size)]
    return TensorDict(query=nested, batch_size=shape)
