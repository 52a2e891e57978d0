"""Policy: what is indexed and why (docs/architecture.md, "Policy").

config.py reads `.ct/index.jsonc`; plan.py turns it (or root detection)
into the effective plan; decide.py answers `why` for one path; project.py
finds the project and maps paths to keys; glob.py compiles patterns.
"""
