"""`ctindex scopes [--effective]`: the plan that decides what is indexed."""

from __future__ import annotations

import argparse
from typing import Any

from ctindex.base import printable
from ctindex.base.output import human_bytes, show_key, table
from ctindex.commands import Context
from ctindex.policy.config import INT_SETTINGS
from ctindex.policy.plan import HARD_RULES, Plan, load_plan
from ctindex.providers import PROVIDERS

_BYTE_SETTINGS = ("max_file_bytes", "max_daemon_memory_bytes", "max_build_memory_bytes")


def run(ctx: Context, args: argparse.Namespace) -> int:
    if getattr(args, "action", None) is not None:  # `scopes add|remove DIR`
        from ctindex.commands.scopes_edit import run as edit

        return edit(ctx, args)
    if getattr(args, "dir", None) is not None or getattr(args, "provider", None) is not None:
        from ctindex.errors import UsageError

        raise UsageError("scopes: DIR and --provider go with `scopes add` (or `remove`)")
    plan = load_plan(ctx.project)
    document = describe(plan, args.effective)
    if ctx.json:
        ctx.emit_json(document)
    else:
        ctx.echo(render(document))
    return 0


def describe(plan: Plan, effective: bool) -> dict[str, Any]:
    """The JSON document of `scopes` (schema: docs/cli.md)."""
    scopes = []
    for scope in plan.scopes:
        provider = PROVIDERS[scope.provider]
        entry: dict[str, Any] = {
            "root": show_key(scope.root),
            "provider": scope.provider,
            "provider_version": provider.version,
            "tokenizer_version": provider.tokenizer_version,
            "include": list(scope.include),
            "exclude": list(scope.exclude),
            "origin": scope.origin,
        }
        if effective:
            entry["digest"] = plan.scope_digest(scope)
        scopes.append(entry)
    config = plan.config.path
    document: dict[str, Any] = {
        "project": str(plan.project.root),
        "config": str(config) if config is not None else None,
        "effective": effective,
        "scopes": scopes,
        "scopes_origin": "project" if plan.derived_roots is None else "derived",
        "exclude": [{"pattern": p, "origin": plan.exclude_origin} for p in plan.exclude],
        "hard": [dict(rule, origin="hard") for rule in HARD_RULES],
        "limits": {"max_file_bytes": plan.settings.max_file_bytes},
    }
    if effective:
        settings = plan.settings
        document["settings"] = {
            key: {"value": value, "origin": settings.origin(key)}
            for key, value in settings.effective().items()
        }
        document["digest"] = plan.digest()
    return document


def render(doc: dict[str, Any]) -> str:
    # Folder names are escaped one a line (ctindex/base/printable.py); the
    # rest goes through Context.echo's catch-all.
    shown = printable.field
    config = shown(doc["config"]) if doc["config"] else "none (derived plan)"
    lines = [f"project  {shown(doc['project'])}", f"config   {config}", ""]
    if not doc["scopes"]:
        lines += [
            "no scopes: no OKF root (a folder with index.md, depth 0-3) was found"
            if doc["scopes_origin"] == "derived"
            else "no scopes: the store lists none (explicit scopes replace root detection)",
            "add one with `ctindex scopes add DIR`",
            "",
        ]
    for scope in doc["scopes"]:
        lines.append(f"scope {shown(scope['root'])}  [{scope['origin']}]")
        rows = [
            [
                "provider",
                f"{scope['provider']} v{scope['provider_version']} "
                f"(tokenizer v{scope['tokenizer_version']})",
            ],
            ["include", "  ".join(scope["include"])],
            ["exclude", "  ".join(scope["exclude"]) or "-"],
        ]
        if "digest" in scope:
            rows.append(["digest", scope["digest"][:16]])
        lines.append(table(rows, indent="  ").rstrip("\n"))
        lines.append("")
    origin = doc["exclude"][0]["origin"] if doc["exclude"] else "-"
    lines.append(f"global exclude  [{origin}]")
    lines.append("  " + ("  ".join(e["pattern"] for e in doc["exclude"]) or "-"))
    lines.append("")
    lines.append("hard exclusions  [hard]")
    lines.append(
        table([[rule["pattern"] or "-", rule["rule"]] for rule in doc["hard"]], indent="  ").rstrip(
            "\n"
        )
    )
    lines.append("")
    if "settings" in doc:
        lines.append("settings")
        rows = [
            [key, _value(key, item["value"]), item["origin"]]
            for key, item in doc["settings"].items()
        ]
        lines.append(table(rows, indent="  ").rstrip("\n"))
        lines.append("")
        lines.append(f"plan digest  {doc['digest']}")
    else:
        size = doc["limits"]["max_file_bytes"]
        lines.append(f"limits  max_file_bytes {human_bytes(size)} ({size})")
    return "\n".join(lines)


def _value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if key in _BYTE_SETTINGS and isinstance(value, int):
        return f"{human_bytes(value)} ({value})"
    assert key in INT_SETTINGS
    return str(value)
