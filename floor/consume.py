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
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import orjson

from controller.audit.files import parse_log_name
from controller.audit.verify import chain_start_of
from floor.core import Floor
from floor.follow import Chunk, LogFile
from floor.forward import (
    AUDIT_SUBJECT,
    STREAM,
    WITNESS_SUBJECT,
    Connection,
    ensure_stream,
    load_nats,
    parse_msg_id,
)
from floor.store import FilePosition

log = logging.getLogger(__name__)

DURABLE = "shoewarden-floor"
#: records asked of the stream per pull request, and the most taken into one transaction;
#: two requests are kept out at once, so a batch arrives while the one before is committed
BATCH = 1000
#: seconds before a message delivered and not acknowledged (a floor killed mid-batch) is
#: delivered again; records after it wait for it (held back, see ``_commit``)
ACK_WAIT = 5
#: parked records beyond PARK_MAX go back to the stream for this long
HOLD_BACK = 0.5
#: the longest a batch gathers the records already on their way before it goes (seconds)
BUSY_WAIT = 0.02
#: how long a pull request stays open on the server: the newest one is renewed a little
#: before it expires (a request lost with a server restart is given up with it)
PULL_EXPIRES = 0.5
RENEW_BEFORE = 0.05
#: how often a floor takes in the tables and alerts other floor processes committed (its
#: pages serve every table, whichever floor consumed its records)
SYNC_EVERY = 1.0
#: the most records a floor parks (delivered before the one they follow, kept
#: unacknowledged until it comes): a bound on its memory and on the keep-alive traffic
PARK_MAX = 5 * BATCH
#: how often parked records look for what another floor process committed, no record coming
PARKED_POLL = 0.02
#: how long the rest of a batch waits, without progress, for another floor process to
#: commit the record it continues, before its table's records are parked
WAIT_FOR_PREDECESSOR = 1.0


#: how long a file's first record waits for the file it continues when this floor has not
#: seen that one (another floor's batch, a killed floor's records back after the ack wait)
ORPHAN_WAIT = 3 * ACK_WAIT
#: a broken file's head as the file that continues it sees it: past any seq it names
BROKEN_HEAD = 1 << 62


def stream_sequence(msg: Any) -> int:
    """A message's place in the stream (0 for one without JetStream metadata), read from
    its reply subject as nats-py's ``Msg.metadata`` reads it (``nats/aio/msg.py``), without
    the dataclasses and the timestamp that builds: ``$JS.ACK.<stream>.<consumer>.
    <delivered>.<sseq>.…`` (9 tokens), or with a domain and an account hash before the
    stream (11 or more)."""
    tokens = (msg.reply or "").split(".")
    if len(tokens) < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        return 0  # not a JetStream message: keep it where it came
    seq = tokens[5] if len(tokens) == 9 else tokens[7] if len(tokens) >= 11 else ""
    return int(seq) if seq.isdigit() else 0


def record_id(msg: Any) -> tuple[str, str, int] | None:
    """A message's ``Nats-Msg-Id`` as (table, file, seq); None when it carries none."""
    headers = msg.headers
    return parse_msg_id(headers.get("Nats-Msg-Id", "")) if headers else None


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
        self.held = 0
        self.witnessed = 0  # checkpoints published on shoewarden.witness.<table>
        self._js: Any = None
        self._sub: Any = None
        self._inbox = ""
        self._ready: list[Any] = []  # delivered, not taken yet, in the order they came
        #: records delivered before the one they follow, by file and seq, each with when it
        #: was last kept alive (:meth:`_park`)
        self._parked: dict[tuple[str, str], dict[int, tuple[Any, float]]] = {}
        self._stalled: set[str] = set()  # tables whose parked records wait for a lost one
        #: files whose first record waits for a file this floor has not seen: since when
        self._orphans: dict[tuple[str, str], float] = {}
        #: when each record in ``_ready`` was delivered (by id): its ack wait runs from then
        self._delivered: dict[int, float] = {}
        self._asked = 0  # records asked of the consumer and not delivered yet
        self._asked_until = 0.0  # when the requests out expire (monotonic)
        self._arrived = asyncio.Event()  # set by each record delivered
        if floor.witness is not None:
            floor.witness_outbox = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        load_nats()  # on this thread: a first import on two threads at once breaks
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="floor-nats", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    async def _main(self) -> None:
        nc = None
        synced = 0.0
        while not self._stop.is_set():
            try:
                if nc is None:
                    nc = await self.connection.connect()
                if self._sub is None:  # (again when the stream or consumer was not ready)
                    js = self._js = nc.jetstream()
                    await ensure_stream(js)
                    await self._bind(js)
                    self._inbox = nc.new_inbox()
                    self._sub = await nc.subscribe(self._inbox, cb=self._arrive)
                await self._ask(nc)
                # A pull request is served as the records come: a record reaching a quiet
                # stream is handed over the moment it arrives.
                deadline = time.monotonic() + PULL_EXPIRES
                while not self._ready and (left := deadline - time.monotonic()) > 0:
                    self._arrived.clear()
                    if self._parked and self.floor.store.shared:
                        left = min(left, PARKED_POLL)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._arrived.wait(), max(0.001, min(
                            left, self._asked_until - time.monotonic())))
                    await self._ask(nc)  # (a request ended or is about to: the next one)
                    if not self._ready and self._parked:
                        await self._retry_parked()
                await self._keep_parked()
                if not self._ready:
                    if time.monotonic() - synced >= SYNC_EVERY:
                        synced = time.monotonic()
                        self.floor.sync()
                    continue
                await self._gather()
                msgs = self._ready[:self.batch]
                del self._ready[:self.batch]
                # the next batch asked for now, and the request on the wire before the
                # commit holds up this loop: the server sends it meanwhile
                await self._ask(nc)
                await asyncio.sleep(0)
                # more records already here: the tables' live states wait (up to 0.1 s) for
                # the commits behind them, not a round trip after every batch
                self.floor.defer_live = bool(self._ready)
                await self._take(msgs)
                if not self._ready:
                    self.floor.save_live_states()
                now = time.monotonic()
                if now - synced >= SYNC_EVERY:  # what the other floor processes committed
                    synced = now
                    self.floor.sync()
            except Exception as exc:
                self.failures += 1
                log.info("floor: NATS: %s: retrying", exc)
                await asyncio.sleep(0.25)
        self.floor.save_live_states()  # (the last ones, when the floor stops)
        if nc is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            await self._release_parked()
            for msg in self._ready:  # delivered, not taken: back to the stream at once
                with contextlib.suppress(Exception):
                    await msg.nak()
            self._ready.clear()
            self._delivered.clear()
            with contextlib.suppress(Exception):
                await nc.close()

    async def _gather(self) -> None:
        """Records are coming: the batch takes what is already on its way (in the socket,
        in nats-py's queue) before it goes, up to a full batch or BUSY_WAIT — a backlog
        goes in batches of ``batch``, a record on a stream that carries a few is not kept
        waiting for more. Records are on their way while a turn of the loop brings more;
        three turns bringing none end it (a chunk read off the socket reaches ``_ready``
        within two: the read loop parses it, then the subscription's task hands it over)."""
        deadline = time.monotonic() + BUSY_WAIT
        idle = 0
        while len(self._ready) < self.batch and idle < 3 and time.monotonic() < deadline:
            before = len(self._ready)
            await asyncio.sleep(0)
            idle = idle + 1 if len(self._ready) == before else 0

    async def _bind(self, js: Any) -> None:
        """The durable pull consumer, created when it is not there yet (as nats-py's
        ``pull_subscribe`` does)."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.js.errors import NotFoundError

        try:
            await js.consumer_info(STREAM, self.durable)
        except NotFoundError:
            await js.add_consumer(STREAM, config=ConsumerConfig(
                name=self.durable, durable_name=self.durable,
                filter_subject=f"{AUDIT_SUBJECT}.>", ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL, ack_wait=ACK_WAIT, max_ack_pending=20_000))

    async def _ask(self, nc: Any) -> None:
        """Keep up to two batches asked of the consumer: a pull request (JetStream's
        ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``, what nats-py's ``fetch`` sends)
        for another batch once fewer than one batch is asked and not taken. The server
        sends a request's records as they come until the batch is full or it expires; an
        expired one answers 408 with what it left undelivered (``_arrive``). The count
        only paces the requests: every record delivered is taken, whichever request it
        answers. The count is not trusted beyond the newest request's expiry (measured: it
        drifted above what the server still had open, and records waited up to a request's
        life for the next one; a server restart loses them all): shortly before the newest
        request expires a new one goes out, so a record reaching the stream never waits
        for a request."""
        now = time.monotonic()
        if now >= self._asked_until:  # the newest request about to expire (or lost)
            self._asked = 0
        if self._asked + len(self._ready) > self.batch:
            return
        request = orjson.dumps({"batch": self.batch, "expires": int(PULL_EXPIRES * 1e9)})
        self._asked += self.batch
        self._asked_until = now + PULL_EXPIRES - RENEW_BEFORE
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{self.durable}", request,
                         reply=self._inbox)

    async def _arrive(self, msg: Any) -> None:
        """A message on the consumer's inbox: a record (kept for the next take) or the
        server's status for a pull request (no data, a ``Status`` header)."""
        headers = msg.headers
        if not msg.data and headers and "Status" in headers:
            status = headers["Status"]
            if status in ("404", "408", "409"):  # a request ended before its batch was full
                left = headers.get("Nats-Pending-Messages", "")
                self._asked = max(0, self._asked - int(left)) if left.isdigit() else 0
                if status == "409":
                    log.info("floor: NATS: pull request ended: %s",
                             headers.get("Description", ""))
                # the loop asks again at once: a record reaching the stream while no request
                # is out would wait for the loop's next turn (up to PULL_EXPIRES)
                self._arrived.set()
            return  # 100: an idle heartbeat
        if self._asked:
            self._asked -= 1
        self._ready.append(msg)
        self._delivered[id(msg)] = time.monotonic()
        self._arrived.set()

    async def _take(self, msgs: list[Any]) -> None:
        """One batch: its runs of consecutive records of one file ingested as one group
        (:meth:`Floor.pipelined`: sent to the database as they are checked, committed
        together), then acknowledged; when the commit fails, nothing of the group is
        acknowledged: it all goes back to the stream.

        A record that comes before the one it follows is parked here, not acknowledged
        (:meth:`_park`), and joins its file's run when the batch that brings its
        predecessor comes — or, with a database shared by several floor processes, when
        another floor commits it (:meth:`_retry_parked`).

        With such a database, a run whose predecessor is not committed yet is most often
        waiting for another floor that has it in hand (the consumer hands the stream out
        in batches, tables interleaved): the group ends before it (committed,
        acknowledged), and the rest of the batch waits for that floor's commit
        (:meth:`_await_progress`). When none comes, the predecessor was lost with a killed
        floor: the table is *stalled* — its records are parked at once, without waiting
        again, until they go in."""
        runs: list[tuple[tuple[str, str], list[tuple[int, Any]]]] = []
        by_file: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        done: set[int] = set()  # id() of the messages answered (or parked again)
        answer = list(msgs)  # what the finally below sends back when not answered
        delivered = self._delivered
        now = time.monotonic()
        # when each was delivered (its ack wait runs from then): kept with it if parked
        touched = {id(m): delivered.pop(id(m), now) for m in msgs}
        went_in = False  # a parked record went in (then the others may follow it)
        try:
            # in stream order: a batch may hold a killed floor's records, delivered again
            # after the ack wait, behind the records that follow them; taken as delivered,
            # the first of those would be held back with everything after it, the records
            # it follows too, and come back in the same order, batch after batch.
            # One run per file, in the order the files first appear: live, the tables'
            # records interleave one by one, and a run per stretch of one file made a batch
            # of 365 records from 49 tables 352 runs — a chain check and a position written
            # to the database each, 170–290 ms of round trips while the next records
            # waited (measured: alert latency p99 up to 1.1 s on a busy machine). A file's
            # records keep their order, and a table's files theirs (the forwarder sends a
            # file only after the one before it).
            for msg in sorted(msgs, key=stream_sequence):
                parsed = record_id(msg)
                if parsed is None:  # not a record the forwarder sent: nothing to index
                    log.warning("floor: NATS: a message on %s without a table:file:seq id",
                                msg.subject)
                    await msg.term()
                    done.add(id(msg))
                    continue
                table, file, seq = parsed
                run = by_file.get((table, file))
                if run is None:
                    run = by_file[(table, file)] = []
                    runs.append(((table, file), run))
                run.append((seq, msg))
            before = set(touched)
            touched.update(self._unpark(runs, by_file, answer))
            unparked = touched.keys() - before
            shared = self.floor.store.shared
            while runs:
                # (file, to ack, (seq, message) to park)
                settled: list[tuple[tuple[str, str], list[Any], list[tuple[int, Any]]]] = []
                waiting: list[tuple[tuple[str, str], list[tuple[int, Any]]]] = []
                with self.floor.pipelined():
                    for i, (key, run) in enumerate(runs):
                        take, held = self._commit(key, run)
                        if held and shared and key[0] not in self._stalled:
                            settled.append((key, take, []))
                            waiting = [(key, held), *runs[i + 1:]]
                            break
                        settled.append((key, take, held))
                # committed: now, and only now, acknowledged
                for key, take, held in settled:
                    for msg in take:
                        await msg.ack()
                        done.add(id(msg))
                        went_in = went_in or id(msg) in unparked
                    if held:
                        self._park(key, held, touched, unparked)
                        done.update(id(msg) for _, msg in held)
                runs = waiting
                if runs and not await self._await_progress(runs[0][0][0]):
                    # its predecessor was lost with a killed floor: it comes back after the
                    # ack wait; the table's records are parked till then, not waited for
                    self._stalled.add(runs[0][0][0])
        finally:
            for m in answer:  # back to the stream at once, in order, for a next batch
                if id(m) not in done:
                    with contextlib.suppress(Exception):
                        await m.nak()
        self._stalled.intersection_update(key[0] for key in self._parked)
        await self._spill_parked()
        if went_in and self._parked:  # (a file parked behind one that has just gone in)
            await self._take([])
            return
        await self._publish_checkpoints()

    def _unpark(self, runs: list[tuple[tuple[str, str], list[tuple[int, Any]]]],
                by_file: dict[tuple[str, str], list[tuple[int, Any]]],
                answer: list[Any]) -> dict[int, float]:
        """Every parked record back into its file's run, in seq order (a file with none in
        this batch gets a run at the end: its predecessor may be committed now). A parked
        record delivered again (its ack wait ran out) is taken as delivered now. Returns
        when each parked one was last kept alive (by id), for :meth:`_park`."""
        touched: dict[int, float] = {}
        parked, self._parked = self._parked, {}
        for key, waiting in parked.items():
            run = by_file.get(key)
            if run is None:
                run = by_file[key] = []
                runs.append((key, run))
            fresh = {seq for seq, _ in run}
            for seq, (msg, kept) in waiting.items():
                if seq not in fresh:
                    run.append((seq, msg))
                    answer.append(msg)
                    touched[id(msg)] = kept
            run.sort(key=lambda item: item[0])
        return touched

    def _park(self, key: tuple[str, str], held: list[tuple[int, Any]],
              touched: dict[int, float], unparked: Collection[int]) -> None:
        """Keep records that came before the one they follow, unacknowledged, until it is
        in. (Sent back to the stream with a delay, as before, the records of one file came
        back in pieces, each in another batch, and a floor restarted after a kill took
        25–55 s to take in a 2,000-record backlog; parked: 1–4 s.) ``touched``: when each
        was delivered, or last kept alive (:meth:`_keep_parked`); ``unparked``: those that
        were parked already."""
        slot = self._parked.setdefault(key, {})
        for seq, msg in held:
            if id(msg) not in unparked:  # (parked for the first time)
                self.held += 1
            slot[seq] = (msg, touched[id(msg)])

    @property
    def parked(self) -> int:
        """Records parked (delivered, waiting here for the one they follow)."""
        return sum(map(len, self._parked.values()))

    async def _spill_parked(self) -> None:
        """Beyond :data:`PARK_MAX` parked records, the latest of the fullest file go back to
        the stream (after ``HOLD_BACK``), a bound on the floor's memory and keep-alive
        traffic. (They stay pending on the server either way: at the consumer's
        ``max_ack_pending`` it delivers nothing new, but a record whose ack wait ran out —
        the one awaited — is still delivered again.)"""
        excess = self.parked - PARK_MAX
        while excess > 0:
            key = max(self._parked, key=lambda k: len(self._parked[k]))
            slot = self._parked[key]
            for seq in sorted(slot, reverse=True)[:excess]:
                msg, _ = slot.pop(seq)
                excess -= 1
                with contextlib.suppress(Exception):
                    await msg.nak(delay=HOLD_BACK)
            if not slot:
                del self._parked[key]

    async def _keep_parked(self) -> None:
        """Parked records kept from being delivered again: their ack wait is restarted
        (JetStream's "in progress") once half of it has gone since they came or were last
        kept."""
        now = time.monotonic()
        for slot in self._parked.values():
            for seq, (msg, kept) in list(slot.items()):
                if now - kept >= ACK_WAIT / 2:
                    try:
                        await msg.in_progress()
                    except Exception:  # (the connection is down: tried again next turn)
                        continue
                    slot[seq] = (msg, now)

    async def _retry_parked(self) -> None:
        """No record came: parked records whose predecessor another floor has committed
        since (a database shared by several floor processes), or a file that has waited
        :data:`ORPHAN_WAIT` for the one it continues, go in now."""
        if not self._parked:
            return
        now = time.monotonic()
        if any(now - since >= ORPHAN_WAIT for key, since in self._orphans.items()
               if key in self._parked):
            await self._take([])  # (a file waited long enough for the one it continues)
            return
        if not self.floor.store.shared:
            return
        if any(self.floor.catch_up(table) for table in {key[0] for key in self._parked}):
            await self._take([])

    async def _release_parked(self) -> None:
        """Stopping: the parked records back to the stream at once."""
        parked, self._parked = self._parked, {}
        for slot in parked.values():
            for msg, _ in slot.values():
                with contextlib.suppress(Exception):
                    await msg.nak()

    async def _await_progress(self, table: str) -> bool:
        """Wait, up to ``WAIT_FOR_PREDECESSOR``, for another floor process to commit more of
        ``table``; True when it did."""
        deadline = time.monotonic() + WAIT_FOR_PREDECESSOR
        await self._keep_parked()  # (a batch may wait on several tables in turn)
        while time.monotonic() < deadline and not self._stop.is_set():
            await asyncio.sleep(0.01)
            if self.floor.catch_up(table):
                return True
        return False

    def _commit(self, key: tuple[str, str], msgs: list[tuple[int, Any]]
                ) -> tuple[list[Any], list[tuple[int, Any]]]:
        """One run of a file's records: those that continue the file's head are ingested
        (into the batch's group), and are to be acknowledged once it is committed, with
        those committed already; a record that comes before the one it follows (a killed
        floor's batch not yet delivered again) is to be held back, with everything after
        it. ``msgs`` are (seq, message); returns (to acknowledge, (seq, message) to hold
        back)."""
        table, file = key
        floor = self.floor

        def where() -> tuple[FilePosition | None, dict[str, int]]:
            with floor.lock:
                watch = floor.tables.get(table)
                pos = watch.files.get(file) if watch is not None else None
                # (a broken file's head stays where it broke: the file that continues it
                # goes in as the file floor takes it, the chain check judging the link)
                heads = {f: p.seq if p.broken is None else BROKEN_HEAD
                         for f, p in watch.files.items()} if watch is not None else {}
            return pos, heads

        pos, heads = where()
        # not where this floor left the file: other floor processes may have taken it on
        # (their commits are the heads too)
        if (pos is None or msgs[0][0] != pos.seq + 1) and floor.catch_up(table):
            pos, heads = where()
        head = pos.seq if pos is not None else 0
        if pos is None and msgs:  # a file not begun: its first record says where it starts
            head = self._starts_after(msgs[0][1].data, head)
        broken = pos is not None and pos.broken is not None
        offset = pos.offset if pos is not None else 0
        lines: list[bytes] = []
        take: list[Any] = []
        held: list[tuple[int, Any]] = []
        expect = head + 1
        for seq, msg in msgs:
            if held or (not broken and seq > expect):
                held.append((seq, msg))
                continue
            if seq < expect or broken:  # already committed (a redelivery), in this batch
                # already (delivered twice while it gathered: a CHAIN_BREAK "seq 1031
                # follows seq 1031" after a killed floor, a fresh clone's CI), or after a break
                self.duplicates += 1
                take.append(msg)
                continue
            if pos is None and not lines and not self._continues(key, msg.data, heads):
                held.append((seq, msg))  # the file before it is not all in yet
                continue
            lines.append(msg.data + b"\n")
            take.append(msg)
            expect = seq + 1
        if lines:
            name = parse_log_name(file)
            if name is None:
                raise ValueError(f"table {table}: {file!r} is not a log file name")
            chunk = Chunk(LogFile(table, name, Path(file)), offset,
                          offset + sum(len(x) for x in lines), lines)
            floor.ingest(table, chunk)  # verified and folded; committed with the batch
            self.received += len(lines)
        return take, held

    async def _publish_checkpoints(self) -> None:
        """The checkpoints the floor signed (already committed to its store) onto
        ``shoewarden.witness.<table>``, de-duplicated by ``witness:<table>:<file>:<seq>``;
        one the broker did not take stays queued for the next batch."""
        outbox = self.floor.witness_outbox
        while outbox and self._js is not None:
            cp = outbox[0]
            await self._js.publish(f"{WITNESS_SUBJECT}.{cp.table}", cp.to_line()[:-1],
                                   stream=STREAM, headers={
                                       "Nats-Msg-Id": f"witness:{cp.table}:{cp.file}:{cp.seq}"})
            outbox.pop(0)
            self.witnessed += 1


    @staticmethod
    def _starts_after(data: bytes, default: int) -> int:
        """The seq a file's first record follows: the one its ``chain.continues`` names (a
        file that continues another, a day's next file: its seqs go on from there), 0 for
        a chain's first file (as ``audit verify`` reads it, :func:`chain_start_of`).
        ``default`` for a record with no ``chain`` (not a file's first: that one is still
        to come). A file that continued another had waited here for ever — its first
        record, seq 11, read as coming before seq 1 (28 Nov 2026)."""
        try:
            chain, start = chain_start_of(orjson.loads(data))
        except orjson.JSONDecodeError:
            return default  # the chain check will say what is wrong with it
        return default if chain is None else start.seq

    def _continues(self, key: tuple[str, str], data: bytes, heads: dict[str, int]) -> bool:
        """A file's first record may go in once the file it continues is in up to the seq
        it names. A file this floor has not seen of the table (none of its records taken
        here nor committed by another floor) is waited for, up to :data:`ORPHAN_WAIT`: it
        is most often in another floor's batch or coming back after a killed floor's ack
        wait (taken at once, the next day went in first, and the day before then raised
        critical CHAIN_BREAKs on a healthy table when it was committed: a review with two
        floors, 28 Nov 2026). After that the chain check judges the file as it says."""
        try:
            chain = orjson.loads(data).get("chain")
        except orjson.JSONDecodeError:
            return True  # the chain check will say what is wrong with it
        cont = chain.get("continues") if isinstance(chain, dict) else None
        if not isinstance(cont, dict):
            return True
        if cont.get("file") in heads:
            self._orphans.pop(key, None)
            return heads[str(cont["file"])] >= int(cont.get("seq") or 0)
        now = time.monotonic()
        since = self._orphans.setdefault(key, now)
        if now - since < ORPHAN_WAIT:
            return False
        del self._orphans[key]
        return True
