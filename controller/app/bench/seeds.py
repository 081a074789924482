"""The bench day's seed: committed to in the log's header, revealed once the day is over.

Every card of a simulated day follows from its seed, so while the day runs the log holds
only a hash of it (``seed_commitment``); the seed and a nonce wait in ``<log>.seed``
(0600) and go into a ``seed_reveal`` record when the last card is out. A resumed day
takes its nonce from there, so its commitment is the same.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from controller.app.bench.options import BenchError
from controller.audit.modes import make_dirs
from controller.audit.seeds import seed_commitment
from controller.session import TableSession


def seed_file(log: Path) -> Path:
    """Where the seed and nonce of a bench log are kept until the day is over (0600)."""
    return log.with_name(log.name + ".seed")


def seed_nonce(log: Path, seed: int) -> str:
    """The nonce of this bench day: the one in ``<log>.seed`` when the log is resumed (the
    same day: the same seed), else a new one, written there first."""
    keep = seed_file(log)
    if log.exists() and log.stat().st_size > 0:
        try:
            kept = json.loads(keep.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BenchError(f"{keep}: missing: the log's seed commitment cannot be checked, so "
                             "this log cannot be resumed; give another --log") from None
        except (OSError, ValueError) as e:
            raise BenchError(f"{keep}: unreadable: {e}") from None
        if not isinstance(kept, dict) or kept.get("seed") != seed \
                or not isinstance(kept.get("nonce"), str):
            raise BenchError(f"{log} holds another bench day (its seed is not {seed}); give "
                             "another --log")
        return str(kept["nonce"])
    nonce = secrets.token_hex(16)
    make_dirs(log.parent)
    fd = os.open(keep, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps({"seed": seed, "nonce": nonce,
                                 "commitment": seed_commitment(seed, nonce)}).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return nonce



def reveal_seed(session: TableSession, seed: int, nonce: str) -> None:
    """The day is over: every card has been dealt, so the seed may now be known. The record
    makes the day reproducible from its log alone (``seed_commitment`` in the header must be
    the hash of ``nonce:seed``)."""
    if session.audit is not None:
        session.audit.write("seed_reveal", session.engine.context(), seed=seed, nonce=nonce,
                            commitment=seed_commitment(seed, nonce))
