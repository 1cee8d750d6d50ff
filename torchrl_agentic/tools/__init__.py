"""Built-in tools."""

from torchrl_agentic.tools.stop import StopTool

__all__ = ["StopTool"]
