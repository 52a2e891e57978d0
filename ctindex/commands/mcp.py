"""`ctindex mcp`: the Model Context Protocol server over stdio (ctindex/mcp_server.py,
docs/mcp.md). Needs the optional extra `ctindex[mcp]`."""

from __future__ import annotations

import argparse

from ctindex.commands import Context
from ctindex.errors import UsageError


def run(ctx: Context, args: argparse.Namespace) -> int:
    del args
    if ctx.json:  # stdout is the JSON-RPC stream: there is no document to print
        raise UsageError("mcp: --json does not apply (the server speaks JSON-RPC on stdout)")
    try:
        from ctindex import mcp_server
    except ImportError as exc:  # only the SDK's absence; our own modules always import
        raise UsageError(
            "`ctindex mcp` needs the MCP SDK: pip install 'ctindex[mcp]' "
            f"({exc.name or exc} is missing)"
        ) from exc
    return mcp_server.serve(ctx.project.root)
