"""`ctindex show ID`: one concept by its ID (docs/cli.md, "show").

What `Index.get` answers (ctindex/service/concepts.py): the ID is resolved
as OKF does, the path relative to its scope (bundle) root without `.md`, in
every scope, or taken as a project-relative path. The concept is read from
its file when asked, so it is never stale.

Text output is the file as it is (frontmatter and body), its control
characters but tab, newline and CRLF escaped (ctindex/base/printable.py
`document`: a document cannot drive the terminal), so `ctindex show ID >
copy.md` reproduces any file without such characters; `--json` holds the
exact text and adds the parsed fields, the whole frontmatter mapping and
the links. Exit codes: 0 shown; 1 no such concept (the closest IDs are
named on stderr, and in the JSON error); 2 an ambiguous ID (the candidates
are named), an unreadable concept file or a configuration that cannot be
honoured.
"""

from __future__ import annotations

import argparse

from ctindex.commands import Context


def run(ctx: Context, args: argparse.Namespace) -> int:
    from ctindex.policy.plan import load_plan

    plan = load_plan(ctx.project)
    missing = ctx.no_scopes_note(plan)
    if missing is not None:  # no concept can exist: build no index to say so
        from ctindex.errors import ConceptNotFound

        error = ConceptNotFound(args.concept)
        error.no_scopes = missing.to_json()  # the JSON error's field (cli.main)
        raise error
    from ctindex.service.concepts import get_concept

    concept = get_concept(plan, args.concept, args.scope)
    if ctx.json:
        ctx.emit_json(concept.to_json())
    else:
        from ctindex.base import printable
        from ctindex.base.output import emit

        text = printable.document(concept.text)
        emit(ctx.out, text if text.endswith("\n") or not text else text + "\n")
    if concept.warning:
        ctx.note(concept.warning)
    return 0
