"""The installed ctindex's version: `ctindex --version` and the MCP server's
`serverInfo` say the same."""

from __future__ import annotations


def version() -> str:
    """The distribution's version, "unknown" when it is not installed
    (a source tree on sys.path)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("ctindex")
    except PackageNotFoundError:
        return "unknown"
