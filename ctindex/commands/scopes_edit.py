"""`ctindex scopes add DIR [--provider ID]` and `ctindex scopes remove DIR`:
change the scopes of `.ct/index.jsonc` with a minimal text edit that keeps
its comments and layout (ctindex/policy/config_edit.py, docs/cli.md).

Without a store, `add` writes the one `init --write` would, with the new
scope. With a derived plan (no `scopes` in the store), `add` writes the
detected roots explicitly first: explicit scopes replace detection,
and adding one must not silently drop the rest. Every refusal is one
line and exit 2; the file is then left as it was.
"""

from __future__ import annotations

import argparse
import os
import stat as stat_mod

from ctindex.commands import Context
from ctindex.errors import UsageError
from ctindex.policy.config import ScopeSpec, display_root
from ctindex.policy.plan import Plan, load_plan
from ctindex.providers import OKF_MARKDOWN, PROVIDERS


def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.dir is None:
        raise UsageError(f"scopes {args.action}: DIR is required")
    if args.effective:
        raise UsageError(f"scopes {args.action}: --effective only goes with plain `scopes`")
    plan = load_plan(ctx.project)  # a malformed store is refused here, as everywhere
    key = _folder_key(ctx, args.dir, must_exist=args.action == "add")
    if args.action == "add":
        return _add(ctx, plan, key, args.provider or OKF_MARKDOWN.id)
    if args.provider is not None:
        raise UsageError("scopes remove: --provider only goes with `scopes add`")
    return _remove(ctx, plan, key)


def _folder_key(ctx: Context, raw: str, must_exist: bool) -> str:
    """The key of DIR (relative to the working folder, or -C): inside the
    project, reached without a symlinked folder, and (for `add`) a folder."""
    located = ctx.project.locate(raw, cwd=ctx.cwd)
    if located.key is None:
        raise UsageError(f"{raw}: is outside the project {ctx.project.root}")
    if located.symlinked is not None or located.escapes:
        raise UsageError(f"{raw}: is reached through a symbolic link (scopes never follow one)")
    if must_exist:
        try:
            st = os.lstat(ctx.project.path(located.key))
        except FileNotFoundError:
            raise UsageError(f"{raw}: does not exist") from None
        except OSError as exc:
            raise UsageError(f"{raw}: cannot be read: {exc.strerror or exc}") from None
        if stat_mod.S_ISLNK(st.st_mode):
            target = _link_target(ctx.project.path(located.key))
            raise UsageError(
                f"{raw}: is a symbolic link{target} "
                "(scopes never follow one; add the folder itself)"
            )
        if not stat_mod.S_ISDIR(st.st_mode):
            raise UsageError(f"{raw}: is not a folder")
    return located.key


def _link_target(path: str | os.PathLike[str]) -> str:
    """' to TARGET' as the link says it, or '' when it cannot be read."""
    try:
        return f" to {os.readlink(path)}"
    except OSError:
        return ""


def _add(ctx: Context, plan: Plan, key: str, provider_id: str) -> int:
    from ctindex.policy.config_edit import add_scope, read_store, replace_file

    provider = PROVIDERS.get(provider_id)
    if provider is None:
        known = ", ".join(sorted(PROVIDERS))
        raise UsageError(f"--provider: unknown provider {provider_id!r} (known: {known})")
    for scope in plan.scopes:
        if scope.root == key:
            raise UsageError(
                f"{display_root(key)}: is already a scope ({scope.origin}, {scope.provider})"
            )
    spec = ScopeSpec(key, provider_id, provider.default_include, ())
    keep = tuple(
        ScopeSpec(s.root, s.provider, s.include, s.exclude)
        for s in plan.scopes
        if plan.derived_roots is not None  # only detected roots need writing down
    )
    path = ctx.project.config_path
    created = plan.config.path is None
    if created:
        from ctindex.policy.config import parse_config

        text, stamp = _new_store(plan, spec), None
        parse_config(text, path)  # the loader's own refusal (e.g. a root inside .ct/okf/)
        try:
            os.makedirs(path.parent, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{path.parent}: cannot create: {exc.strerror or exc}") from None
    else:
        old, stamp = read_store(path)
        text = add_scope(old, path, spec, keep)
    replace_file(path, text, stamp)
    return _done(ctx, "added", key, provider_id, created, len(keep))


def _remove(ctx: Context, plan: Plan, key: str) -> int:
    from ctindex.policy.config_edit import read_store, remove_scope, replace_file

    path = ctx.project.config_path
    if plan.derived_roots is not None:
        found = any(s.root == key for s in plan.scopes)
        what = "a detected OKF root" if found else "not a scope"
        raise UsageError(
            f"{display_root(key)}: is {what}, and {path} lists no scopes to remove it from"
            + (" (`ctindex init --write` writes the detected ones down)" if found else "")
        )
    if not any(s.root == key for s in plan.scopes):
        raise UsageError(f"{display_root(key)}: is not a scope of {path}")
    old, stamp = read_store(path)
    replace_file(path, remove_scope(old, path, key), stamp)
    return _done(ctx, "removed", key, None, False, 0)


def _new_store(plan: Plan, spec: ScopeSpec) -> str:
    """The store `init --write` would write, with `spec` among its scopes."""
    from ctindex.commands.init import config_values, store_comments
    from ctindex.policy.config import config_text
    from ctindex.policy.config_edit import scope_value

    values = config_values(plan)
    values["scopes"].append(scope_value(spec))
    detected = len(plan.derived_roots or ())
    comments = [
        "ctindex project store (written by `ctindex scopes add`).",
        f"Explicit scopes replace OKF root detection; the {detected} detected root(s) are listed.",
        *store_comments(plan)[2:],  # init's notes on the settings left out
    ]
    return config_text(values, comments)


def _shadowed_by(plan: Plan, key: str) -> str | None:
    """The root of a scope listed before the scope `key` that contains it:
    the first scope containing a file decides it (Plan.find_scope), so that
    one decides every file of `key` and the new scope none."""
    found = plan.find_scope(key)
    return found[0].root if found is not None and found[0].root != key else None


def _done(ctx: Context, verb: str, key: str, provider: str | None, created: bool, kept: int) -> int:
    path = ctx.project.config_path
    after = load_plan(ctx.project)
    if verb == "added" and after.settings.gitignore_index:
        from ctindex.policy.gitignore import write_gitignore

        write_gitignore(ctx.project.root)
    outer = _shadowed_by(after, key) if verb == "added" else None
    if outer is not None:
        ctx.note(
            f"{display_root(key)} lies inside the scope {display_root(outer)}, listed before it, "
            f"which decides every file there: the new scope indexes nothing until it is "
            f"listed above {display_root(outer)} in {path}"
        )
    if ctx.json:
        ctx.emit_json(
            {
                "path": str(path),
                "action": "add" if verb == "added" else "remove",
                "root": display_root(key),
                "provider": provider,
                "created": created,
                "detected_kept": kept,
                "scopes": [display_root(s.root) for s in after.scopes],
                "shadowed_by": None if outer is None else display_root(outer),
            }
        )
        return 0
    if not ctx.quiet:
        where = f"{'created ' if created else ''}{path}"
        with_provider = f" ({provider})" if provider else ""
        ctx.echo(f"{verb} scope {display_root(key)}{with_provider}: {where}")
        if kept:
            ctx.echo(
                f"  the {kept} detected root(s) are listed too: explicit scopes replace detection"
            )
        ctx.echo(f"  {len(after.scopes)} scope(s) now; the next search or update indexes them")
    return 0
