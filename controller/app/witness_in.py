"""``run``/``bench --witness-from URL``: the floor's signed checkpoints of this table's chain
into the table's own log, as ``witness_checkpoint`` inputs.

The listener (:class:`floor.forward.WitnessListener`) runs on a thread of its own; each
checkpoint becomes an input event posted to the runtime's queue, so the engine thread feeds
and logs it like any other input, in its place among them (a replay reproduces it).

With ``--witness-public PUB`` (the floor's public key) a checkpoint is recorded only when
its signature verifies under it: anyone who can publish on the table's witness subject could
otherwise put a checkpoint of their making into the table's log. One that does not verify is
refused with a warning naming it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.events import WitnessCheckpoint

if TYPE_CHECKING:
    from controller.app.runtime import TableRuntime
    from controller.audit.witness import Checkpoint

log = logging.getLogger(__name__)


def witness_input(cp: Checkpoint) -> WitnessCheckpoint:
    return WitnessCheckpoint(table=cp.table, file=cp.file, chain_seq=cp.seq,
                             chain_hash=cp.hash, signed_at=cp.ts, key=cp.key, sig=cp.sig)


def public_key_of(args: Any) -> Any:
    """The floor's public key of ``--witness-public`` (None without it); raises
    ``floor.forward.ForwardError`` naming the file when it is not one."""
    path = getattr(args, "witness_public", None)
    if not path:
        return None
    from controller.audit.witness import WitnessError, load_public_key
    from floor.forward import ForwardError

    if not getattr(args, "witness_from", None):
        raise ForwardError("--witness-public needs --witness-from (the NATS servers the "
                           "checkpoints come from)")
    try:
        return load_public_key(path)
    except WitnessError as exc:
        raise ForwardError(f"--witness-public {exc}") from None


def signed_by(public: Any) -> Any:
    """A check for the listener: None when a checkpoint's signature verifies under
    ``public``, else why it does not."""
    from controller.audit.witness import check_signatures

    def check(cp: Checkpoint) -> str | None:
        _, bad = check_signatures([cp], public)
        return bad[0] if bad else None
    return check


def listen(log_file: str | Path, args: Any, runtime: TableRuntime) -> Any:
    """The started listener for ``--witness-from`` (None without it); ``args`` carries
    ``witness_from``, ``witness_public``, ``nats_creds``, ``nats_ca``. Raises
    ``floor.forward.ForwardError`` for bad options."""
    public = public_key_of(args)  # (first: --witness-public alone is refused, not ignored)
    urls = getattr(args, "witness_from", None)
    if not urls:
        return None
    from floor.forward import Connection, witness_listener_for_log

    return witness_listener_for_log(
        log_file, urls, Connection([], getattr(args, "nats_creds", None),
                                   getattr(args, "nats_ca", None)),
        lambda cp: runtime.post_event(witness_input(cp)),
        check=signed_by(public) if public is not None else None)
