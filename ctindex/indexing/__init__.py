"""The indexing room: one write transaction over the store.

transaction.py takes the update lock, reconciles the files against the
published file table and publishes a generation (update, update_paths,
rebuild, repair); analyse.py parses and analyses the bytes the reconciler
captured, in process or in a fork pool. Below it: the store (the one publish
point, ctindex/store/writer.py), policy and providers.
"""
