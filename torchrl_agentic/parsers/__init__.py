"""Tool-call parsers, one module per wire format."""

from torchrl_agentic.parsers.base import ToolCallParser
from torchrl_agentic.parsers.hermes import HermesParser
from torchrl_agentic.parsers.jsonblock import JSONBlockParser
from torchrl_agentic.parsers.openai import OpenAIParser
from torchrl_agentic.parsers.xml import XMLParser

__all__ = ["HermesParser", "JSONBlockParser", "OpenAIParser", "ToolCallParser", "XMLParser"]
