"""torchrl_agentic: fast, safe, exact tool execution for LLM reinforcement learning with TorchRL."""

from torchrl_agentic._history import ToolResponseText, tool_call_id, tool_call_ids
from torchrl_agentic.compose import ToolCompose
from torchrl_agentic.errors import (
    ConfigError,
    InvalidArgumentsError,
    MalformedCallError,
    StopSignal,
    ToolCallLimitError,
    ToolError,
    ToolExecutionError,
    ToolTimeoutError,
    UnknownToolError,
)
from torchrl_agentic.parsers import (
    HermesParser,
    JSONBlockParser,
    OpenAIParser,
    ToolCallParser,
    XMLParser,
)
from torchrl_agentic.ratelimit import RateLimiter
from torchrl_agentic.sessions import Session, SessionStore
from torchrl_agentic.tool import Tool
from torchrl_agentic.tools import StopTool
from torchrl_agentic.types import (
    DispatchResult,
    ImagePart,
    JSONPart,
    JsonPart,
    MalformedCall,
    ParsedCall,
    ParseResult,
    StepStats,
    TextPart,
    ToolContext,
    ToolResult,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DispatchResult",
    "HermesParser",
    "ImagePart",
    "InvalidArgumentsError",
    "JSONBlockParser",
    "JSONPart",
    "JsonPart",
    "MalformedCall",
    "MalformedCallError",
    "OpenAIParser",
    "ParseResult",
    "ParsedCall",
    "RateLimiter",
    "Session",
    "SessionStore",
    "StepStats",
    "StopSignal",
    "StopTool",
    "TextPart",
    "Tool",
    "ToolCallLimitError",
    "ToolCallParser",
    "ToolCompose",
    "ToolContext",
    "ToolError",
    "ToolExecutionError",
    "ToolResponseText",
    "ToolResult",
    "ToolTimeoutError",
    "UnknownToolError",
    "XMLParser",
    "tool_call_id",
    "tool_call_ids",
]
