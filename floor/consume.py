"""The database floor's transport: the tables' records from NATS JetStream into the floor.

A durable pull consumer (``shoewarden-floor``) on ``shoewarden.audit.>`` of the stream
``SHOEWARDEN`` hands each batch, in stream order, to :meth:`floor.core.Floor.ingest`: the
same chain check, fold, alerts and index (PostgreSQL) as the floor that follows files. A
message is acknowledged only after the transaction that holds its row committed; a floor
killed before that gets the message again, and a record the index already holds (its seq
at or below the file's committed head) is acknowledged and dropped, so every record is in
the database exactly once.

The messages carry their place in ``Nats-Msg-Id`` (``<table>:<file>:<seq>``); the byte
offsets the floor keeps per file are counted as if the records were a file, so a restart
resumes from the index exactly as the file floor does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from controller.audit.files import parse_log_name
from floor.core import Floor
from floor.follow import Chunk, LogFile
from floor.forward import AUDIT_SUBJECT, STREAM, Connection, ensure_stream, parse_msg_id

log = logging.getLogger(__name__)

DURABLE = "shoewarden-floor"
BATCH = 1000


class NatsConsumer:
    """Feeds ``floor`` from the stream, on an asyncio loop in a thread of its own."""

    def __init__(self, floor: Floor, connection: Connection, *, durable: str = DURABLE,
                 batch: int = BATCH) -> None:
        self.floor = floor
        self.connection = connection
        self.durable = durable
        self.batch = batch
        self.received = 0
        self.duplicates = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="floor-nats", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    async def _main(self) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        nc = None
        sub = None
        while not self._stop.is_set():
            try:
                if nc is None:
                    nc = await self.connection.connect()
                    js = nc.jetstream()
                    await ensure_stream(js)
                    sub = await js.pull_subscribe(
                        f"{AUDIT_SUBJECT}.>", durable=self.durable, stream=STREAM,
                        config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT,
                                              deliver_policy=DeliverPolicy.ALL, ack_wait=30,
                                              max_ack_pending=20_000))
                assert sub is not None
                try:
                    msgs = await sub.fetch(self.batch, timeout=0.5)
                except TimeoutError:
                    continue
                await self._take(msgs)
            except Exception as exc:
                self.failures += 1
                log.info("floor: NATS: %s: retrying", exc)
                await asyncio.sleep(0.25)
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()

    async def _take(self, msgs: list[Any]) -> None:
        """One batch: runs of consecutive records of one file ingested (committed), then
        acknowledged; a run that fails is not acknowledged, nor anything after it."""
        run: list[Any] = []
        key: tuple[str, str] | None = None
        pending = list(msgs)
        try:
            for msg in msgs:
                parsed = parse_msg_id((msg.headers or {}).get("Nats-Msg-Id", ""))
                if parsed is None:  # not a record the forwarder sent: nothing to index
                    log.warning("floor: NATS: a message on %s without a table:file:seq id",
                                msg.subject)
                    await msg.term()
                    pending.remove(msg)
                    continue
                table, file, _ = parsed
                if key is not None and key != (table, file):
                    await self._commit(key, run)
                    for m in run:
                        pending.remove(m)
                    run = []
                key = (table, file)
                run.append(msg)
            if key is not None and run:
                await self._commit(key, run)
                for m in run:
                    pending.remove(m)
        finally:
            for m in pending:  # back to the stream at once, in order, for the next fetch
                with contextlib.suppress(Exception):
                    await m.nak()

    async def _commit(self, key: tuple[str, str], msgs: list[Any]) -> None:
        table, file = key
        floor = self.floor
        with floor.lock:
            watch = floor.tables.get(table)
            pos = watch.files.get(file) if watch is not None else None
            head = pos.seq if pos is not None else 0
            broken = pos is not None and pos.broken is not None
            offset = pos.offset if pos is not None else 0
        lines = []
        for msg in msgs:
            parsed = parse_msg_id(msg.headers.get("Nats-Msg-Id", ""))
            assert parsed is not None
            if parsed[2] <= head or broken:
                self.duplicates += 1  # already committed (a redelivery), or after a break
                continue
            lines.append(bytes(msg.data) + b"\n")
        if lines:
            name = parse_log_name(file)
            if name is None:
                raise ValueError(f"table {table}: {file!r} is not a log file name")
            chunk = Chunk(LogFile(table, name, Path(file)), offset,
                          offset + sum(len(x) for x in lines), lines)
            floor.ingest(table, chunk)  # verified, folded, committed: then acknowledged
            self.received += len(lines)
        for msg in msgs:
            await msg.ack()
