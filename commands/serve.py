"""`redline serve` (the language server) and `redline mcp` (the MCP server), both on stdio."""

from __future__ import annotations

import argparse
import sys

from .exits import EXIT_INFRA, EXIT_OK


def serve_lsp(args: argparse.Namespace) -> int:
    from redline.server.main import serve

    serve()
    return EXIT_OK


def serve_mcp(args: argparse.Namespace) -> int:
    try:
        from redline.mcp_server import serve
    except ImportError:
        print("redline mcp: the MCP SDK is not installed: pip install 'redline[mcp]'", file=sys.stderr)
        return EXIT_INFRA
    serve(args.root)
    return EXIT_OK
