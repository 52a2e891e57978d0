"""What the CLI, the Python API, the MCP server and the daemon all answer
with, below any of them: the status document, the watcher's report, what an
update could not take in, why a path is (not) indexed, the version, and
concepts read by ID. Each module computes; rendering (text lines, exit codes
of a command) stays with ctindex/commands/, and nothing here imports it or
ctindex/cli.py (docs/architecture.md, "Layers")."""
