"""JSON Schemas (draft 2020-12) of every command's `--json` output, shipped
with the package: `importlib.resources.files("ctindex.schemas") / "status.json"`.
docs/cli.md describes the same fields for people."""
