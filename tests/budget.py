"""How many examples a Hypothesis test runs: its own count, or a tenth of it in the inner
loop (``make quick``: ``HYPOTHESIS_PROFILE=quick``).

A test's own ``@settings(max_examples=N)`` overrides the loaded profile's, so the
``quick`` profile's tenth reaches a test that sets a count only through :func:`examples`.
"""

from __future__ import annotations

import os

QUICK = os.environ.get("HYPOTHESIS_PROFILE") == "quick"


def examples(n: int) -> int:
    """``n``, or a tenth of it (at least 5) in the inner loop."""
    return max(5, n // 10) if QUICK else n
