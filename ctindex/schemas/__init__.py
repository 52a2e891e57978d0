"""JSON Schemas (draft 2020-12) of every command's `--json` output, shipped
with the package (docs/cli.md describes the same fields for people).

Each schema's `$id` is its file name (`status.json`), and a schema names
another by that id (`status.json`'s `watcher` is `{"$ref":
"watch-status.json"}`). `registry()` holds them all, so

    jsonschema.validate(doc, ctindex.schemas.load("status"), registry=ctindex.schemas.registry())

resolves every reference; `bundled(name)` is one self-contained schema with
the references written out (what the MCP server publishes as a tool's
output schema, for clients that resolve no reference).

`registry()` and `bundled()` need the `referencing` package (installed with
`jsonschema`, which the `mcp` and `test` extras bring); it is imported
only when they are called, so the rest of ctindex does not depend on it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from referencing import Registry
    from referencing._core import Resolver

    from ctindex.base.jsontypes import JSON, JSONObject

# Every shipped schema, by name (the file is `<name>.json`).
NAMES = (
    "init",
    "scopes",
    "scopes-edit",
    "why",
    "status",
    "watch-status",
    "update",
    "verify",
    "search",
    "show",
    "watch-control",
    "concepts",
    "error",
)

# Command -> the schemas of its --json output (besides `error`, which any
# command may print instead). `mcp` speaks the Model Context Protocol, not
# --json; its tools' outputs are `search`, `show`, `why`, `status` and
# `concepts` (docs/mcp.md).
COMMANDS: dict[str, tuple[str, ...]] = {
    "init": ("init",),
    "scopes": ("scopes", "scopes-edit"),  # plain and --effective; add and remove
    "why": ("why",),
    "status": ("status",),
    "update": ("update",),
    "rebuild": ("update",),
    "verify": ("verify",),
    "search": ("search",),
    "show": ("show",),
    "watch": ("watch-status", "watch-control"),  # status; start and stop
    "mcp": (),
    "help": (),  # text for people: --json is a usage error
    "completion": (),
}


@cache
def _text(name: str) -> str:
    if name not in NAMES:
        raise KeyError(f"no schema named {name!r} (known: {', '.join(NAMES)})")
    return (files(__name__) / f"{name}.json").read_text(encoding="utf-8")


def load(name: str) -> JSONObject:
    """The schema `name` (`status`, `search`, ...) as shipped, references
    included (a new dict on each call: the caller may change it)."""
    schema: JSONObject = json.loads(_text(name))  # every shipped schema is an object
    return schema


def registry() -> Registry[JSON]:
    """A `referencing.Registry` of every shipped schema, under its `$id`."""
    from referencing import Registry, Resource

    empty: Registry[JSON] = Registry()
    shipped: list[tuple[str, Resource[JSON]]] = [
        (f"{name}.json", Resource.from_contents(load(name))) for name in NAMES
    ]
    return empty.with_resources(shipped)


def bundled(name: str) -> JSONObject:
    """The schema `name` with each `$ref` to another shipped schema replaced
    by what it names: one document with no reference to resolve. `referencing`
    resolves each reference (a file, or a JSON pointer into one); only the
    substitution is done here (docs/decisions/json-contract.md)."""
    resolver = registry().resolver(base_uri=f"{name}.json")
    return _inline_object(load(name), resolver)


def _inline(node: JSON, resolver: Resolver[JSON]) -> JSON:
    if isinstance(node, list):
        return [_inline(item, resolver) for item in node]
    if not isinstance(node, dict):
        return node
    return _inline_object(node, resolver)


def _inline_object(node: JSONObject, resolver: Resolver[JSON]) -> JSONObject:
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        found = resolver.lookup(ref)
        if not isinstance(found.contents, dict):
            raise TypeError(f"{ref}: names no schema object")
        body = {k: v for k, v in found.contents.items() if k not in ("$schema", "$id")}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _inline_object({**body, **siblings}, found.resolver)
    return {key: _inline(value, resolver) for key, value in node.items()}
