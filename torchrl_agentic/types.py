"""Data contracts shared by every layer: frozen dataclasses, no behaviour beyond small helpers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensordict import TensorDictBase

    from torchrl_agentic.sessions import Session


@dataclass(frozen=True)
class ParsedCall:
    """One well-formed tool call found in an assistant message."""

    tool: str
    """Name of the tool the model asked for."""
    args: Mapping[str, Any]
    """Decoded arguments (a JSON object)."""
    call_id: str
    """Identifier echoed in the tool message that answers this call."""
    index: int = field(default=0, kw_only=True)
    """Position of the call among all call sites of the message (valid and malformed)."""
    raw: str = field(default="", kw_only=True)
    """The call's source text, when the wire format has one."""


@dataclass(frozen=True)
class MalformedCall:
    """A call site that could not be decoded; the model gets ``message`` back as an error result."""

    message: str
    """What was wrong, written for the model."""
    call_id: str
    """Identifier of the error tool message."""
    index: int = field(default=0, kw_only=True)
    """Position of the call site among all call sites of the message."""
    raw: str = field(default="", kw_only=True)
    """The offending text (possibly truncated)."""
    tool: str | None = field(default=None, kw_only=True)
    """The tool name, when it could be recovered."""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ParseResult:
    """What a parser found in one message."""

    text: str
    """The message text with tool-call syntax removed (reasoning kept)."""
    calls: tuple[ParsedCall, ...] = ()
    """Well-formed calls, in message order."""
    errors: tuple[MalformedCall, ...] = ()
    """Malformed call sites, in message order."""

    def ordered(self) -> list[ParsedCall | MalformedCall]:
        """Calls and errors merged back into message order."""
        return sorted([*self.calls, *self.errors], key=lambda c: c.index)


@dataclass(frozen=True)
class TextPart:
    """Plain text."""

    text: str
    """The text."""


@dataclass(frozen=True)
class JSONPart:
    """A JSON-serialisable value, rendered for the model as compact JSON."""

    data: Any
    """The value."""


@dataclass(frozen=True)
class ImagePart:
    """An image, carried as base64 data or a URL."""

    data: str = ""
    """Base64-encoded bytes (empty when ``url`` is set)."""
    mime_type: str = "image/png"
    """MIME type of the image."""
    url: str | None = field(default=None, kw_only=True)
    """Where the image lives, instead of inline data."""


JsonPart = JSONPart
"""TorchRL's agentic design spells it ``JsonPart``; both names are the same class."""

Part = TextPart | JSONPart | ImagePart


def _part_text(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, JSONPart):
        return json.dumps(part.data, ensure_ascii=False, default=str)
    return f"[image {part.mime_type}{' ' + part.url if part.url else ''}]"


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call, as the model will read it."""

    parts: tuple[Part, ...] = ()
    """Content parts, rendered in order."""
    is_error: bool = field(default=False, kw_only=True)
    """True when the call failed; the message says why."""
    meta: Mapping[str, Any] = field(default_factory=dict, kw_only=True)
    """Free-form data for the trainer or the recorder (never shown to the model)."""

    @classmethod
    def from_text(
        cls, text: str, *, is_error: bool = False, meta: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """A result made of one text part."""
        return cls((TextPart(text),), is_error=is_error, meta=dict(meta or {}))

    @classmethod
    def from_json(
        cls, data: Any, *, is_error: bool = False, meta: Mapping[str, Any] | None = None
    ) -> ToolResult:
        """A result made of one JSON part."""
        return cls((JSONPart(data),), is_error=is_error, meta=dict(meta or {}))

    @classmethod
    def error(cls, message: str, *, meta: Mapping[str, Any] | None = None) -> ToolResult:
        """An error result carrying ``message``."""
        return cls.from_text(message, is_error=True, meta=meta)

    @property
    def text(self) -> str:
        """All parts rendered as text and joined with newlines."""
        return "\n".join(_part_text(p) for p in self.parts)


@dataclass(frozen=True)
class DispatchResult:
    """Everything one batch item's newest message caused in one step."""

    cleaned_text: str
    """The message text without tool-call syntax."""
    calls: tuple[ParsedCall | MalformedCall, ...] = ()
    """Every call site, valid or not, in message order."""
    results: tuple[ToolResult, ...] = ()
    """One result per entry of ``calls``, same order."""
    any_error: bool = False
    """True when at least one result is an error."""
    stop_requested: bool = False
    """True when a tool asked to end the trajectory."""

    @property
    def call_ids(self) -> tuple[str, ...]:
        """The ids of ``calls``, in order."""
        return tuple(c.call_id for c in self.calls)


@dataclass
class ToolContext:
    """What a tool knows about the call it is serving."""

    call_id: str
    """Id of the call being served."""
    batch_index: int
    """Flat index of the batch item (row-major over the env's batch dims)."""
    deadline: float | None = None
    """``time.monotonic()`` value past which the call is cancelled, or None."""
    state: TensorDictBase | None = None
    """The item's tensordict without its history; set only with ``pass_state_to_tools`` for tools
    with ``wants_state = True``."""
    session: Session | None = None
    """The trajectory's session store (per item, from its reset to its next reset or ``close()``)."""
    tool: str = ""
    """Name of the tool being called."""

    def time_left(self, now: float) -> float | None:
        """Seconds left before ``deadline`` at monotonic time ``now``, or None without a deadline."""
        return None if self.deadline is None else max(0.0, self.deadline - now)


@dataclass(frozen=True)
class StepStats:
    """Counts and timings of the last step of a ToolCompose."""

    items_with_calls: int = 0
    """Batch items whose newest message had at least one call site."""
    calls: int = 0
    """Call sites (valid and malformed) answered."""
    errors: int = 0
    """Error results among them."""
    dispatch_seconds: float = 0.0
    """Wall time of running the calls (all items at once)."""
    total_seconds: float = 0.0
    """Wall time of the whole transform step: parse, dispatch, build the History, flags."""
