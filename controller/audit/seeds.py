"""A bench day's seed commitment, and the check an auditor makes of its reveal.

Every card of a simulated day follows from its seed, so the log's header holds only a hash
of it (``settings.seed_commitment``: ``sha256:`` of ``nonce:seed``) until the day is over;
then a ``seed_reveal`` record gives seed and nonce (``controller/app/bench/seeds.py``). Here
once, for the bench that writes both and for ``audit report`` that checks one against the
other: a reveal that does not hash to the header's commitment means the day was not dealt
from the seed it claims (a review: no tool checked it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any


def seed_commitment(seed: int, nonce: str) -> str:
    """The commitment to a bench day's seed written in its log's header."""
    return "sha256:" + hashlib.sha256(f"{nonce}:{seed}".encode()).hexdigest()


def reveal_problem(committed: Any, reveal: Mapping[str, Any]) -> str | None:
    """Why a ``seed_reveal`` record does not match the header's commitment (None: it
    does)."""
    seed, nonce = reveal.get("seed"), reveal.get("nonce")
    if type(seed) is not int or not isinstance(nonce, str):
        return "it gives no integer seed and string nonce"
    if not isinstance(committed, str):
        return "the header commits to no seed"
    made = seed_commitment(seed, nonce)
    if made != committed:
        return f"seed {seed} with its nonce hashes to {made}, the header committed to {committed}"
    return None
