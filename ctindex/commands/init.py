"""`ctindex init [--dry-run|--write]`: print or materialise the derived
`.ct/index.jsonc`. Never indexes. The per-machine daemon memory
ceiling is never written: it must be recomputed on each machine."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ctindex.base.output import human_bytes
from ctindex.commands import Context
from ctindex.errors import CtindexError
from ctindex.policy.config import CONFIG_VERSION, config_text
from ctindex.policy.gitignore import write_gitignore
from ctindex.policy.plan import Plan, default_daemon_memory, load_plan


def run(ctx: Context, args: argparse.Namespace) -> int:
    plan = load_plan(ctx.project)
    values = config_values(plan)
    text = config_text(values, store_comments(plan))
    path = ctx.project.config_path
    if args.write:
        _write(path, text)
        written = load_plan(ctx.project)
        if written.settings.gitignore_index:
            write_gitignore(ctx.project.root)
        if ctx.json:
            ctx.emit_json(
                {"path": str(path), "written": True, "config": values, "digest": written.digest()}
            )
        elif not ctx.quiet:
            ctx.echo(f"wrote {path} ({len(plan.scopes)} scope(s))")
        return 0
    if ctx.json:
        ctx.emit_json(
            {"path": str(path), "written": False, "config": values, "digest": plan.digest()}
        )
    else:
        ctx.echo(text)
        _hints(ctx, plan)
    return 0


def _hints(ctx: Context, plan: Plan) -> None:
    """What to do next, on stderr (silenced by -q): a folder that is no
    project yet becomes one with `--write`; a plan without scopes names how
    to add one (docs/cli.md, "No scopes")."""
    from ctindex.policy.project import find_root

    if find_root(str(ctx.project.root)) is None:
        ctx.note(
            f"{ctx.project.root} is no project yet (no .ct/ or .git): "
            "`ctindex init --write` makes it one, with the configuration above"
        )
    ctx.no_scopes_note(plan)


def config_values(plan: Plan) -> dict[str, Any]:
    """The effective plan as a project store, keys in the order of `TOP_KEYS`."""
    settings = plan.settings
    values: dict[str, Any] = {"version": CONFIG_VERSION}
    for key, value in settings.effective().items():
        if key == "max_daemon_memory_bytes" and settings.origin(key) != "project":
            continue  # computed per machine: never materialised
        values[key] = value
    values["scopes"] = [scope.as_dict() for scope in plan.scopes]
    values["exclude"] = list(plan.exclude)
    return values


def store_comments(plan: Plan) -> list[str]:
    if plan.derived_roots is not None:
        source = (
            f"Scopes derived from {len(plan.derived_roots)} detected OKF root(s); "
            "explicit scopes replace detection."
        )
    else:
        source = "Scopes as configured in the existing project store."
    lines = ["ctindex project store (written by `ctindex init --write`).", source]
    if plan.settings.origin("max_daemon_memory_bytes") != "project":
        memory = default_daemon_memory()
        lines += [
            "max_daemon_memory_bytes is left out on purpose: each machine uses",
            f"min(2 GiB, physical RAM / 20), here {human_bytes(memory)} ({memory}).",
        ]
    return lines


def _write(path: os.PathLike[str], text: str) -> None:
    directory = os.path.dirname(os.fspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        # O_EXCL: never overwrite a store the user may have edited.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise CtindexError(
            f"{os.fspath(path)}: already exists; not overwritten "
            "(edit it, or remove it and run init --write again)"
        ) from None
    except OSError as exc:
        raise CtindexError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
