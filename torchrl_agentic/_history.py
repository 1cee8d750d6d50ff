"""Building and appending tool messages to a TorchRL ``History`` in bulk.

Per-message tensorclass construction dominates a step at batch 64, so the step's tool messages are
built in one go and appended with the fewest tensordict operations the history's layout allows.
The fast paths read tensordict's lazy-stack layout; any layout they do not recognise falls back to
``History.extend``, which gives the same messages.

Call ids: TorchRL's ``History`` has no ``tool_call_id`` field (and a key that only some messages have
breaks stacking), so a tool message's ``content`` is a :class:`ToolResponseText`: a ``str`` that
renders like any other string and carries ``tool_call_id`` and ``name`` as attributes. It is stored
as-is, so the ids survive stacking, indexing and ``tolist()``; inside ``apply_chat_template`` a
template can read ``message.content.tool_call_id``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from torchrl.data.llm import History

PAD_ROLE = "<none>"
"""Role of the placeholder messages that pad items with fewer results; ``apply_chat_template`` drops them."""


class ToolResponseText(str):
    """The text of a tool message, carrying the id and name of the call it answers.

    Examples:
        >>> text = ToolResponseText("42", tool_call_id="call_0", name="calculator")
        >>> text == "42", text.tool_call_id, text.name
        (True, 'call_0', 'calculator')
    """

    tool_call_id: str
    name: str
    is_error: bool

    def __new__(
        cls, text: str, *, tool_call_id: str, name: str = "", is_error: bool = False
    ) -> ToolResponseText:
        self = super().__new__(cls, text)
        self.tool_call_id = tool_call_id
        self.name = name
        self.is_error = is_error
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self), self.tool_call_id, self.name, self.is_error))

    def __repr__(self) -> str:
        return f"ToolResponseText({str(self)!r}, tool_call_id={self.tool_call_id!r})"


def _rebuild(text: str, tool_call_id: str, name: str, is_error: bool) -> ToolResponseText:
    return ToolResponseText(text, tool_call_id=tool_call_id, name=name, is_error=is_error)


def tool_call_id(content: object) -> str | None:
    """The call id carried by a message's content, or None for messages that answer no call."""
    return getattr(content, "tool_call_id", None)


def tool_call_ids(history: History) -> list[Any]:
    """The ``tool_call_id`` of every message of ``history`` (None where there is none), nested like
    ``history.content``."""
    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(v) for v in value]
        return tool_call_id(value)

    content = history.content
    return walk(list(content) if not isinstance(content, str) else content)


_EMPTY = TensorDict._new_unsafe
_SCALAR = torch.Size([])


def _ntd(value: Any) -> NonTensorData:
    """A scalar ``NonTensorData`` without the tensorclass constructor (about 6x faster)."""
    obj = NonTensorData.__new__(NonTensorData)
    obj.__dict__.update(
        _tensordict=_EMPTY(batch_size=_SCALAR),
        _non_tensordict={"data": value, "_is_non_tensor": True, "_metadata": None},
        _is_initialized=True,
    )
    return obj


def _fields(td: TensorDict) -> dict[str, Any]:
    """The raw key -> value dict of a plain TensorDict (``items()`` wraps every value on the way)."""
    return td._tensordict


def _stack(items: Sequence[Any], dim: int = 0) -> NonTensorStack:
    return NonTensorStack._new_lazy_unsafe(*items, stack_dim=dim)


def _pad(rows: Sequence[Sequence[tuple[str, str]]]) -> tuple[list[list[tuple[str, str]]], int]:
    width = max((len(r) for r in rows), default=0)
    return [list(r) + [(PAD_ROLE, "")] * (width - len(r)) for r in rows], width


def append_messages(prompt: History, rows: Sequence[Sequence[tuple[str, str]]]) -> History:
    """``prompt`` (shape ``(B, T)``) with ``rows[b]`` (``(role, content)`` pairs) appended to item b.

    Items with fewer messages are padded with ``<none>`` placeholders. Returns a new History; the
    input is not modified.
    """
    if len(rows) != prompt.batch_size[0] or prompt.ndim != 2:
        raise ValueError(
            f"append_messages needs a (B, T) history and B rows, got history of shape "
            f"{tuple(prompt.batch_size)} and {len(rows)} rows; flatten batch dims first"
        )
    padded, width = _pad(rows)
    if width == 0:
        return prompt
    td = prompt._tensordict
    if _per_item_layout(td):
        return _append_per_item(td, padded)
    if _time_stacked_layout(td):
        return _append_time_stacked(td, padded, width)
    return prompt.extend(_build(padded), inplace=False, dim=-1)


def newest_messages(prompt: History) -> list[dict[str, Any]]:
    """The last message of every item of a ``(B, T)`` history as dicts (role, content, tool_calls)."""
    td = prompt._tensordict
    if _per_item_layout(td):
        return [_last_of(item) for item in td.tensordicts]
    if _time_stacked_layout(td):
        columns = {key: stack.tensordicts[-1] for key, stack in _fields(td).items()}
        return [
            {key: _data(_entry(col, b)) for key, col in columns.items()}
            for b in range(td.batch_size[0])
        ]
    newest = prompt[:, -1]
    roles, contents = newest.role, newest.content
    calls = newest.tool_calls
    calls = calls if isinstance(calls, list) else [calls] * len(roles)
    return [
        {"role": r, "content": c, "tool_calls": t} for r, c, t in zip(roles, contents, calls)
    ]


def _last_of(item: TensorDict) -> dict[str, Any]:
    return {key: _data(stack.tensordicts[-1]) for key, stack in _fields(item).items()}


def _entry(column: Any, b: int) -> Any:
    return column.tensordicts[b] if isinstance(column, NonTensorStack) else column


def _data(value: Any) -> Any:
    return value.data if isinstance(value, NonTensorData) else value.tolist()


def _build(padded: list[list[tuple[str, str]]]) -> History:
    roles = [[role for role, _ in row] for row in padded]
    contents = [[content for _, content in row] for row in padded]
    return History(role=roles, content=contents, batch_size=(len(padded), len(padded[0])))


def _fields_are_stacks(td: Any, stack_dim: int) -> bool:
    fields = _fields(td)
    return (
        "role" in fields
        and "content" in fields
        and all(type(v) is NonTensorStack and v.stack_dim == stack_dim for v in fields.values())
    )


def _per_item_layout(td: Any) -> bool:
    """A lazy stack over the batch of per-item ``(T,)`` tensordicts of message stacks."""
    return (
        isinstance(td, LazyStackedTensorDict)
        and td.stack_dim == 0
        and all(type(t) is TensorDict and _fields_are_stacks(t, 0) for t in td.tensordicts)
    )


def _time_stacked_layout(td: Any) -> bool:
    """A dense ``(B, T)`` tensordict whose fields are stacks over time of ``(B,)`` stacks."""
    return type(td) is TensorDict and td.batch_dims == 2 and _fields_are_stacks(td, 1)


def _new_value(key: str, role: str, content: str) -> Any:
    if key == "role":
        return role
    if key == "content":
        return content
    if key == "is_complete":
        return True
    return None


def _append_per_item(td: LazyStackedTensorDict, padded: list[list[tuple[str, str]]]) -> History:
    items = []
    for item, row in zip(td.tensordicts, padded):
        fields = {}
        for key, stack in _fields(item).items():
            new = [_ntd(_new_value(key, role, content)) for role, content in row]
            fields[key] = _stack([*stack.tensordicts, *new])
        length = item.batch_size[0] + len(row)
        items.append(TensorDict._new_unsafe(fields, batch_size=torch.Size([length])))
    return History._from_tensordict(LazyStackedTensorDict._new_lazy_unsafe(*items, stack_dim=0))


def _append_time_stacked(td: TensorDict, padded: list[list[tuple[str, str]]], width: int) -> History:
    batch, length = td.batch_size
    fields = {}
    for key, stack in _fields(td).items():
        columns = [
            _stack([_ntd(_new_value(key, *row[k])) for row in padded]) for k in range(width)
        ]
        fields[key] = _stack([*stack.tensordicts, *columns], dim=1)
    out = TensorDict._new_unsafe(fields, batch_size=torch.Size([batch, length + width]))
    return History._from_tensordict(out)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while a step builds its (long-lived) message objects.

    A step at batch 64 allocates ~10k small objects for the new History entries; with the
    collector on, that triggers a dozen young collections and regularly a full one over
    everything torch and transformers keep alive, costing more than the rest of the step.
    Collection resumes (one young pass) right after; a collector the user disabled stays off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
