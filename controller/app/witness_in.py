"""``run``/``bench --witness-from URL``: the floor's signed checkpoints of this table's chain
into the table's own log, as ``witness_checkpoint`` inputs.

The listener (:class:`floor.forward.WitnessListener`) runs on a thread of its own; each
checkpoint becomes an input event posted to the runtime's queue, so the engine thread feeds
and logs it like any other input, in its place among them (a replay reproduces it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.events import WitnessCheckpoint

if TYPE_CHECKING:
    from controller.app.runtime import TableRuntime
    from controller.audit.witness import Checkpoint


def witness_input(cp: Checkpoint) -> WitnessCheckpoint:
    return WitnessCheckpoint(table=cp.table, file=cp.file, chain_seq=cp.seq,
                             chain_hash=cp.hash, signed_at=cp.ts, key=cp.key, sig=cp.sig)


def listen(log_file: str | Path, args: Any, runtime: TableRuntime) -> Any:
    """The started listener for ``--witness-from`` (None without it); ``args`` carries
    ``witness_from``, ``nats_creds``, ``nats_ca``. Raises ``floor.forward.ForwardError``
    for bad options."""
    urls = getattr(args, "witness_from", None)
    if not urls:
        return None
    from floor.forward import Connection, witness_listener_for_log

    return witness_listener_for_log(
        log_file, urls, Connection([], getattr(args, "nats_creds", None),
                                   getattr(args, "nats_ca", None)),
        lambda cp: runtime.post_event(witness_input(cp)))
