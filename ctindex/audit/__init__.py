"""Checking an index without writing it: `ctindex verify`'s deep integrity
and drift audit (verify.py) and its node_exporter metrics (metrics.py)."""
