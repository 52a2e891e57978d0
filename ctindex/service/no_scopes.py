"""The note every indexing command gives when the plan has no scope: why
there is nothing to index and how to add a scope (docs/cli.md, "No scopes").

A newcomer's first `ctindex search` in a folder of plain Markdown would
otherwise answer `0 of 0 matches` as if the search had looked and found
nothing. Text output puts the note on stderr (silenced by -q; the commands'
`Context.no_scopes_note`); `--json` carries it as the `no_scopes` field
instead, never as stderr noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ctindex.policy.plan import Plan

ADD_HINT = "ctindex scopes add DIR"


def detection_rule() -> str:
    """What root detection looks for: the index provider's marker and depth
    (ctindex/providers/__init__.py, ctindex/policy/plan.py)."""
    from ctindex.providers import INDEX_PROVIDER, PROVIDERS

    provider = PROVIDERS[INDEX_PROVIDER]
    return (
        f"root detection looks for a folder at depth 0-{provider.root_depth} holding a "
        f"regular {provider.root_marker}, hidden and excluded folders skipped; "
        'docs/cli.md, "No scopes"'
    )


class NoScopes(NamedTuple):
    """Why a plan has no scope (`message`) and the command that adds one (`hint`)."""

    message: str
    hint: str

    def to_json(self) -> dict[str, str]:
        return {"message": self.message, "hint": self.hint}

    def line(self) -> str:
        return f"{self.message}; add one with `{self.hint}`"


def no_scopes(plan: Plan) -> NoScopes | None:
    """The note for a plan without scopes, None when it has some."""
    if plan.scopes:
        return None
    if plan.derived_roots is None:  # explicit `scopes: []`: detection is off
        config = plan.config.path or plan.project.config_path
        message = f"no scopes: {config} lists none, and explicit scopes replace root detection"
    else:
        message = f"no scopes: no OKF root found under {plan.project.root} ({detection_rule()})"
    return NoScopes(message, ADD_HINT)
