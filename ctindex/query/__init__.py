"""How a query's answer is proven fresh before it is read: the barrier,
reconcile-on-query and fallback (freshness.py); CI mode (cimode.py)."""
