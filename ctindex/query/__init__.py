"""How a query's answer is proven fresh before it is read: the barrier,
reconcile-on-query and fallback (freshness.py), the fast path's record of
the plan (fastpath.py), CI mode (cimode.py)."""
