"""What the client and the daemon both need: the wire protocol, the runtime
folder and its records, the peer check, the build id (standard library
only: the query path imports it)."""
