"""
MCP tool calls of a durable run (R-34): the SDK turns each MCP tool into a ``FunctionTool``; this
module adds what a journaled MCP call needs beyond a function tool.
"""

from __future__ import annotations

from collections.abc import Callable


def install_mcp_hooks(note_failure: Callable[[BaseException], None]) -> None:
    """Install the MCP hooks; ``note_failure`` marks the running tool call as failed."""
