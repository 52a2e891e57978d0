"""The daemon's clients: asking (daemon_requests), starting (spawn) and
controlling (control) the project's daemon, and remembering one that did
not answer (unanswered). The daemon is started by module name, never
imported from here (ctindex/daemon/ is a sibling room)."""
