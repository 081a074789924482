"""What ``shoewarden bench`` takes and how it ends: options, exit codes, the error for bad input.

Apart so every step of a run (setup, monitor, verdict) can speak them without importing
one another.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.audit.chain import Durability

EXIT_OK, EXIT_DEVIATION, EXIT_BAD_INPUT, EXIT_FAILED = 0, 1, 2, 3
DRIVERS = {"shoe": "swp-shoe", "scanner": "swp-scanner", "shuffler": "swp-shuffler"}
PLAN_KEYS = ("shoes", "rounds_per_block", "decks", "dealer_changes")


class BenchError(Exception):
    """Bad input for a bench run (exit 2) or a run that could not start (exit 3)."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class BenchOptions:
    profile: str | None = None
    shoes: int | None = None
    rounds_per_block: int | None = None
    seed: int | None = None
    scenario: str | None = None
    log: str | None = None
    anchors: str | None = None
    pace: float | None = None
    durability: str = Durability.INPUT.value
    stall_timeout: float = 30.0
    startup_timeout: float = 30.0
    verbose: bool = False
    table: str | None = None  # the table id written in the log (default: the day's, T1)
    no_progress: bool = False  # no bar even on a terminal (controller.progressbar)
    display: str | None = None  # HOST:PORT of the dealer display (floor.display), or none
    publish: list[str] | None = None  # NATS URLs the forwarder publishes the log to
    nats_creds: str | None = None
    nats_ca: str | None = None
    disclosure: str = "live"  # what the forwarder lets leave the table (floor.forward.HoldBack)
    witness_from: list[str] | None = None  # NATS URLs of the floor's signed checkpoints
    witness_public: str | None = None  # the floor's public witness key: checkpoints checked

