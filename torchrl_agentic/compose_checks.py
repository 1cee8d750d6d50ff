"""Construction-time checks of a ToolCompose: misuse raises with the rule, the value and the fix."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torchrl_agentic.errors import ConfigError
from torchrl_agentic.parsers.base import ToolCallParser
from torchrl_agentic.tool import Tool


def check_parser(parser: object) -> None:
    """``TypeError`` unless ``parser`` implements the ToolCallParser protocol."""
    if isinstance(parser, str) or not isinstance(parser, ToolCallParser):
        raise TypeError(
            f"parser must implement parse(), render_result() and render_tools() "
            f"(a ToolCallParser), got {parser!r}; use e.g. parser=HermesParser()"
        )


def check_settings(
    per_call_timeout: float | None, max_calls_per_step: int | None, tool_role: str
) -> None:
    """Validate the scalar settings of a ToolCompose."""
    if per_call_timeout is not None:
        if isinstance(per_call_timeout, bool) or not isinstance(per_call_timeout, (int, float)):
            raise TypeError(
                f"per_call_timeout must be a number of seconds or None, got "
                f"{type(per_call_timeout).__name__}"
            )
        if not (per_call_timeout > 0 and math.isfinite(per_call_timeout)):
            raise ConfigError(
                f"per_call_timeout must be > 0 seconds, got {per_call_timeout}; use None for no limit"
            )
    if max_calls_per_step is not None:
        if isinstance(max_calls_per_step, bool) or not isinstance(max_calls_per_step, int):
            raise TypeError(
                f"max_calls_per_step must be an int or None, got {type(max_calls_per_step).__name__}"
            )
        if max_calls_per_step < 1:
            raise ConfigError(
                f"max_calls_per_step must be >= 1, got {max_calls_per_step}; use None for no limit"
            )
    if not isinstance(tool_role, str) or not tool_role:
        raise ConfigError(f"tool_role must be a non-empty str, got {tool_role!r}; the default is 'tool'")


def check_rate_limits(rate_limits: Mapping[str, Any] | None, tools: Mapping[str, Tool]) -> dict[str, Any]:
    """The rate limits as a dict; each key must name a tool and each value hand out ``slot()``s."""
    if rate_limits is None:
        return {}
    if not isinstance(rate_limits, Mapping):
        raise TypeError(
            f"rate_limits must map tool names to RateLimiter objects, got {type(rate_limits).__name__}"
        )
    for name, limiter in rate_limits.items():
        if name not in tools:
            raise ConfigError(
                f"rate_limits names unknown tool {name!r}; tools are: {', '.join(tools) or '(none)'}"
            )
        if not callable(getattr(limiter, "slot", None)):
            raise TypeError(
                f"rate_limits[{name!r}] must be a RateLimiter (with an async slot()), "
                f"got {type(limiter).__name__}"
            )
    return dict(rate_limits)
