"""Why a path is or is not indexed: each decision with what more there is
to say about it (a path beneath no scope root) and the command that would
change it, as `ctindex why` and the MCP `why` tool give them."""

from __future__ import annotations

import os
from dataclasses import replace

from ctindex.base.output import show_key
from ctindex.policy.decide import OUTSIDE_SCOPE, Decision
from ctindex.policy.plan import Plan
from ctindex.service.no_scopes import ADD_HINT

_NO_SCOPE_ROOT = "not beneath any scope root"


def explained(plan: Plan, decisions: list[Decision]) -> list[tuple[Decision, str | None]]:
    """Each decision with what more there is to say about it, and the
    command that would change it (or None): `why` and the MCP `why` tool."""
    explain = _Unscoped(plan)
    return [explain(d) for d in decisions]


def _folder_hint(plan: Plan, key: str | None) -> str | None:
    """The command that makes the folder holding `key` a scope (the project
    root's files: the project itself), when no detected root would; none
    for a path that does not exist (nothing there to index)."""
    if key is None or not os.path.lexists(plan.project.path(key)):
        return None
    folder = key.rpartition("/")[0]
    return f"ctindex scopes add {show_key(folder) if folder else '.'}"


class _Unscoped:
    """Says more about a path beneath no scope root: with explicit scopes,
    that they replace root detection and, when detection would
    have found an OKF root holding the path, that root and the command
    adding it; with no scope at all, how to add one. Detection runs once,
    only when such a path is asked about (it lists folders, writes nothing
    unless the runtime folder already exists: ctindex/policy/plan.py)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._detected: tuple[str, ...] | None = None

    def __call__(self, decision: Decision) -> tuple[Decision, str | None]:
        if decision.reason != OUTSIDE_SCOPE or decision.scope is not None:
            return decision, None
        if not decision.detail.startswith(_NO_SCOPE_ROOT):
            return decision, None
        key = decision.path if self.plan.project.key(decision.path) == decision.path else None
        rest = decision.detail[len(_NO_SCOPE_ROOT) :]
        if self.plan.derived_roots is None:
            config = self.plan.config.path or self.plan.project.config_path
            extra = f"; the explicit scopes of {config} replace OKF root detection"
            root = self._detected_root(key) if key is not None else None
            if root is None:
                hint = _folder_hint(self.plan, key)
            else:
                extra += f", which would have found the OKF root {show_key(root)}"
                hint = f"ctindex scopes add {show_key(root)}"
        elif not self.plan.scopes:
            extra, hint = "; no OKF root was found, so there is no scope", ADD_HINT
        else:
            return decision, _folder_hint(self.plan, key)
        return replace(decision, detail=_NO_SCOPE_ROOT + extra + rest), hint

    def _detected_root(self, key: str) -> str | None:
        if self._detected is None:
            from ctindex.policy.plan import detect_roots

            self._detected = detect_roots(self.plan.project, self.plan.exclude_set)
        for root in self._detected:
            if not root or key == root or key.startswith(root + "/"):
                return root
        return None


def document(raw: str, decision: Decision, hint: str | None = None) -> dict[str, object]:
    """One item of the `decisions` list (ctindex/schemas/why.json)."""
    document: dict[str, object] = {"input": raw}
    document.update(decision.as_dict())
    document["path"] = show_key(decision.path)
    if decision.scope is not None:
        document["scope"] = show_key(decision.scope)
    document["hint"] = hint
    return document


def why_document(plan: Plan, asked: list[str], decisions: list[Decision]) -> dict[str, object]:
    """`ctindex why --json`'s document: each path as asked with its
    decision, in order, and whether all are included."""
    found = explained(plan, decisions)
    return {
        "project": str(plan.project.root),
        "all_included": all(decision.included for decision, _hint in found),
        "decisions": [
            document(raw, decision, hint)
            for raw, (decision, hint) in zip(asked, found, strict=True)
        ],
    }
