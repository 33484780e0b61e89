"""`redline mcp`: hotspots, capture and verified optimisation as MCP tools for coding agents. Built on
the readers' and the evaluator's public interfaces only."""

from .server import build, serve

__all__ = ["build", "serve"]
