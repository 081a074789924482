"""The table-side forwarder: every record of the local log, in order, to NATS JetStream.

The table's local log stays the source of truth; this only reads it (the floor's own
follower, :mod:`floor.follow`) and publishes each record, inputs and outputs, to the
stream ``SHOEWARDEN``, subject ``shoewarden.audit.<table>``, with

- ``Nats-Msg-Id`` = ``<table>:<file>:<seq>``: a resend (after a lost ack) is de-duplicated
  by the stream;
- ``Nats-Expected-Last-Subject-Sequence`` = the stream sequence of the table's previous
  record: the stream refuses a record that does not follow the last one it holds for the
  table, so a gap is refused, never stored.

It asks the stream where each table stands (the last message on its subject) when it
starts and after every failure, and resumes from the record after that one: every record
arrives exactly once, in order, whatever was lost in between (an outage, a broker killed
with its acks unsent, a restart of the table).

Card disclosure applies here, at the publisher (``--disclosure shoe``): no card of a shoe
leaves the table before that shoe ends. Whole records are held back (:class:`HoldBack`) from
the first record of a shoe until the record that ends it, then published in order: the
floor receives the table's records unaltered and verifies its chain exactly as it would
live, only later. A table with no shoe that ends (a continuous shuffler, hand-dealt stud)
has no count to protect and publishes live.

nats-py is asyncio: its loop runs on a thread of its own (:meth:`Forwarder.start`). ``run``
and ``bench --publish`` run it in a child process of its own (``shoewarden forward
--until-eof``, :mod:`floor.forward_process`), so that its work never takes the GIL from the
table's engine thread; the table never calls into it and never waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floor.follow import LogFile, read_new, scan

if TYPE_CHECKING:
    from controller.audit.witness import Checkpoint

log = logging.getLogger(__name__)

STREAM = "SHOEWARDEN"
AUDIT_SUBJECT = "shoewarden.audit"
WITNESS_SUBJECT = "shoewarden.witness"
#: JetStream's error code for "wrong last sequence" (an expected-last check refused)
WRONG_LAST_SEQUENCE = 10071


class ForwardError(ValueError):
    """Bad forwarder options (a URL that is not nats://, a missing credentials file)."""


class DamagedRecord(ValueError):
    """A line of a table's log that is no record (not JSON, no seq): it cannot be published,
    and no record after it may be (the stream would have a gap the floor refuses). Not the
    broker's trouble: asking the stream again cannot mend it."""

    def __init__(self, file: str, line: bytes, why: str) -> None:
        super().__init__(why)
        self.file, self.line, self.why = file, line, why


def load_nats() -> None:
    """Import nats-py whole, on the calling thread, before a thread of ours first uses it.

    nats-py's modules import one another (``nats.js`` and ``nats.js.errors`` in a circle,
    ``nc.jetstream()`` reading the attribute ``nats.js``). Imported for the first time on
    two threads at once — a forwarder's or consumer's loop, a witness listener, a test
    publishing — one of them sees a module half made: ``AttributeError: module 'nats' has
    no attribute 'js'`` or ``ImportError: … partially initialized module
    'nats.js.errors'`` (both seen in tests/test_floor_nats_tamper.py). Every ``start``
    below calls this first, so the loops find it all imported."""
    import nats
    import nats.js
    import nats.js.api
    import nats.js.errors  # noqa: F401


def audit_subject(table: str) -> str:
    return f"{AUDIT_SUBJECT}.{table}"


def msg_id(table: str, file: str, seq: int) -> str:
    return f"{table}:{file}:{seq}"


def parse_msg_id(text: str) -> tuple[str, str, int] | None:
    """``<table>:<file>:<seq>`` → its parts (table ids and file names hold no colon)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def _line_number(path: Path, line: bytes) -> int | None:
    """The 1-based number of the first line of ``path`` that is ``line`` (None if none)."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if raw == line:
                return n
    return None


def record_seq(line: bytes) -> int:
    """A record line's top-level ``seq``."""
    import orjson

    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ValueError("a record that is not JSON") from None
    seq = rec.get("seq") if isinstance(rec, dict) else None
    if type(seq) is not int:
        raise ValueError("a record without seq")
    return seq


def check_servers(urls: Iterable[str]) -> list[str]:
    out = []
    for url in urls:
        for one in url.split(","):
            one = one.strip()
            if not one.startswith(("nats://", "tls://")):
                raise ForwardError(f"--publish {one!r}: expected nats://HOST:PORT "
                                   "(or tls://HOST:PORT)")
            out.append(one)
    if not out:
        raise ForwardError("--publish: no server")
    return out


#: what the publisher lets leave the table: ``live`` every record as written, ``shoe`` a
#: shoe's records only once that shoe ended
PUBLISH_DISCLOSURES = ("live", "shoe")
#: the states in which no shoe is being dealt: a record in one of them ends the hold
NO_SHOE_OPEN = frozenset({"closed", "opening_check", "shuffle", "shoe_complete",
                          "closing_check"})


@dataclass
class HoldBack:
    """Which of a table's records may leave the table now, under its disclosure.

    Under ``shoe`` a record written while a shoe is open (its ``state`` is not one of
    :data:`NO_SHOE_OPEN`) waits, with every record after it, until a record in a state where
    no shoe is open: the shoe ended (``shoe_complete``), or the table closed. Records keep
    their order and their bytes; only the moment they leave changes. A table whose header
    says it deals from no shoe that ends publishes live.
    """

    disclosure: str = "live"
    shoe_game: bool = True  # from the file's header: card_source "shoe", no continuous shuffler
    pending: list[tuple[str, bytes]] = field(default_factory=list)  # (file, line)
    header_of: str | None = None  # the file whose header set ``shoe_game``

    def learn(self, file: str, header: dict[str, Any]) -> None:
        profile = header.get("profile") if isinstance(header.get("profile"), dict) else {}
        assert isinstance(profile, dict)
        shuffler = profile.get("shuffler") if isinstance(profile.get("shuffler"), dict) else {}
        assert isinstance(shuffler, dict)
        self.shoe_game = (profile.get("card_source") == "shoe"
                          and shuffler.get("continuous") is not True)
        self.header_of = file

    def learn_from(self, path: Path) -> None:
        """The header of a file the forwarder resumes in the middle of."""
        import orjson

        with contextlib.suppress(OSError, ValueError), open(path, "rb") as f:
            first = orjson.loads(f.readline())
            if isinstance(first, dict) and first.get("kind") == "header":
                self.learn(path.name, first)

    def take(self, file: str, lines: Iterable[bytes]) -> list[tuple[str, bytes]]:
        """The records that may leave now, in order, of those held and ``lines``."""
        if self.disclosure == "live":
            return [(file, line) for line in lines]
        import orjson

        out: list[tuple[str, bytes]] = []
        for line in lines:
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                rec = {}
            if not isinstance(rec, dict):
                rec = {}
            if rec.get("kind") == "header":
                self.learn(file, rec)
            state = rec.get("state")
            held = self.shoe_game and isinstance(state, str) and state not in NO_SHOE_OPEN
            if held or (self.pending and not isinstance(state, str)):
                self.pending.append((file, line))
                continue
            out += self.pending
            out.append((file, line))
            self.pending = []
        return out


class LinkReport:
    """What nats-py says of the link, as the operator should read it: one line when the
    servers cannot be reached (at the start, or reconnecting after the link dropped), one
    when they are again. (A drop that a reconnect mends at once is not news, and a close
    of our own is not trouble: nats-py's ``disconnected_cb`` fires on both.)

    nats-py's default error callback logs every failed attempt with its traceback: with the
    broker down, a table's forwarder (a child process writing to the dealer's terminal) and
    the floor printed one every 0.5 s, as long as the outage lasted."""

    def __init__(self, servers: list[str]) -> None:
        self.where = ", ".join(servers)
        self.trouble: str | None = None  # what was reported and has not cleared since

    def _say(self, text: str) -> None:
        if text != self.trouble:
            self.trouble = text
            log.warning("NATS %s: %s; trying again every 0.5 s", self.where, text)

    async def error(self, exc: Exception) -> None:
        self._say(f"cannot reach the broker: {str(exc) or type(exc).__name__}")

    def connected(self) -> None:
        if self.trouble is not None:
            self.trouble = None
            log.warning("NATS %s: connected", self.where)

    async def reconnected(self) -> None:
        self.connected()


@dataclass
class Connection:
    """How to reach the NATS servers: URLs (several for a cluster), credentials, TLS; and
    what the table lets out over them (``disclosure``, :class:`HoldBack`)."""

    servers: list[str]
    creds: str | None = None
    tls_ca: str | None = None
    disclosure: str = "live"
    #: the link's trouble told once per outage, across the connections made through this
    report: LinkReport | None = field(default=None, repr=False, compare=False)

    async def connect(self) -> Any:
        import ssl

        import nats

        kw: dict[str, Any] = {}
        if self.creds:
            kw["user_credentials"] = self.creds
        if self.tls_ca or any(s.startswith("tls://") for s in self.servers):
            kw["tls"] = ssl.create_default_context(cafile=self.tls_ca)
        if self.report is None:
            self.report = LinkReport(self.servers)
        report = self.report
        nc = await nats.connect(servers=self.servers, connect_timeout=2,
                                reconnect_time_wait=0.5, max_reconnect_attempts=-1,
                                allow_reconnect=True, error_cb=report.error,
                                reconnected_cb=report.reconnected, **kw)
        report.connected()
        return nc


async def ensure_stream(js: Any) -> None:
    """The stream ``SHOEWARDEN`` on ``shoewarden.audit.>`` and ``shoewarden.witness.>``,
    on disk; created by whichever side gets there first."""
    from nats.js.api import StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    try:
        await js.stream_info(STREAM)
    except NotFoundError:
        with contextlib.suppress(Exception):  # another process created it meanwhile
            await js.add_stream(StreamConfig(
                name=STREAM, subjects=[f"{AUDIT_SUBJECT}.>", f"{WITNESS_SUBJECT}.>"],
                storage=StorageType.FILE))
        await js.stream_info(STREAM)


@dataclass
class TableCursor:
    """Where one table stands: in the stream and in its local files."""

    table: str
    subject_seq: int = 0  # the stream sequence of the table's last record there (0: none)
    file: str | None = None  # the file and seq of that record
    seq: int = 0
    offsets: dict[str, int] = field(default_factory=dict)  # local bytes read (published or
    synced: bool = False  # held back)
    hold: HoldBack = field(default_factory=HoldBack)


def offset_after(path: Path, seq: int) -> int:
    """The byte offset just after the record ``seq`` of a local file (its end when the file
    holds no such record: everything in it was published)."""
    pos = 0
    with open(path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            pos += len(line)
            with contextlib.suppress(ValueError):
                if record_seq(line) == seq:
                    return pos
    return pos


class Forwarder:
    """Follows ``roots`` and publishes every record to JetStream (see the module doc).

    ``tables``: only these ids. ``stop_when_done``: return once everything on disk is in
    the stream (``forward`` of a log that is no longer written).
    """

    def __init__(self, roots: list[Path], connection: Connection, *,
                 tables: frozenset[str] | None = None, poll_interval: float = 0.02,
                 stop_when_done: bool = False) -> None:
        self.roots = [Path(r) for r in roots]
        self.connection = connection
        self.only = tables
        self.poll_interval = poll_interval
        self.stop_when_done = stop_when_done
        self.cursors: dict[str, TableCursor] = {}
        self.published = 0
        self.duplicates = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nc: Any = None
        self._js: Any = None
        self.error: BaseException | None = None
        #: per table, why its records stopped at a damaged line (what the operator is told;
        #: the other tables go on)
        self.damaged: dict[str, str] = {}
        self._caught_up = False

    # ------------------------------------------------------------------ the thread

    def start(self) -> None:
        load_nats()
        self._thread = threading.Thread(target=self.run, name="shoewarden-forwarder",
                                        daemon=True)
        self._thread.start()

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # kept for the caller; the table deals on regardless
            self.error = exc
            log.exception("forwarder: stopped")

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def running(self) -> bool:
        """True while the loop's thread runs (it ends on its own only on an error)."""
        return self._thread is not None and self._thread.is_alive()

    def alive_after_stop(self) -> bool:
        """True when the loop had not caught up when it was stopped."""
        return not self._caught_up

    # ------------------------------------------------------------------ the loop

    async def _main(self) -> None:
        while not self._stop.is_set():
            try:
                if self._nc is None:
                    self._nc = await self.connection.connect()
                    self._js = self._nc.jetstream()
                    await ensure_stream(self._js)
                n, done = await self._pass()
                self._caught_up = done
                if done and self.stop_when_done:
                    break
                if n == 0:
                    await asyncio.sleep(self.poll_interval)
            except Exception as exc:
                # the broker is down, an ack was lost, a check refused: ask the stream again
                self.failures += 1
                self._caught_up = False
                log.info("forwarder: %s: resyncing with the stream", exc)
                for cursor in self.cursors.values():
                    cursor.synced = False
                await asyncio.sleep(0.25)
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()
            self._nc = None

    async def _pass(self) -> tuple[int, bool]:
        """Publish what is new in every followed file: (records published, all caught up)."""
        total = 0
        done = True
        for table, files in scan(self.roots).items():
            if (self.only is not None and table not in self.only) or table in self.damaged:
                continue
            cursor = self.cursors.get(table)
            if cursor is None:
                cursor = self.cursors[table] = TableCursor(
                    table, hold=HoldBack(self.connection.disclosure))
            if not cursor.synced:
                await self._sync(cursor, files)
            for lf in files:
                while True:
                    at = cursor.offsets.get(lf.file, 0)
                    chunk = read_new(lf, at, 1 << 20)
                    if chunk is None:
                        break
                    if at and cursor.hold.header_of != lf.file:
                        cursor.hold.learn_from(lf.path)  # resumed mid-file: its header
                    cursor.offsets[lf.file] = chunk.end
                    try:
                        total += await self._publish(cursor, cursor.hold.take(lf.file,
                                                                              chunk.lines))
                    except DamagedRecord as bad:
                        self._damaged(table, files, bad)
                        break
                    done = False if chunk.lines else done
                if table in self.damaged:
                    break
        return total, done and total == 0

    def _damaged(self, table: str, files: list[LogFile], bad: DamagedRecord) -> None:
        """Stop following ``table`` at a damaged line, and say where (once)."""
        path = next((lf.path for lf in files if lf.file == bad.file), Path(bad.file))
        where = _line_number(path, bad.line)
        self.damaged[table] = (f"{path}: " + (f"line {where}: " if where else "")
                               + f"{bad.why}: not published, nor anything after it of table "
                               f"{table} (audit verify names the damage)")
        log.warning("forwarder: %s", self.damaged[table])

    @property
    def held(self) -> int:
        """Records read and held back under the disclosure (their shoe has not ended)."""
        return sum(len(c.hold.pending) for c in self.cursors.values())

    async def _sync(self, cursor: TableCursor, files: list[LogFile]) -> None:
        """Where the stream stands for this table, and so where each local file resumes."""
        from nats.js.errors import NotFoundError

        try:
            last = await self._js.get_last_msg(STREAM, audit_subject(cursor.table))
        except NotFoundError:
            last = None
        cursor.offsets.clear()
        cursor.hold.pending.clear()  # read again from where the stream stands
        if last is None:
            cursor.subject_seq, cursor.file, cursor.seq = 0, None, 0
        else:
            parsed = parse_msg_id((last.headers or {}).get("Nats-Msg-Id", ""))
            if parsed is None:
                raise RuntimeError(f"the stream's last record of {cursor.table} has no "
                                   "table:file:seq message id")
            cursor.subject_seq = int(last.seq)
            _, cursor.file, cursor.seq = parsed
            names = [lf.file for lf in files]
            from floor.core import file_order

            for lf in files:
                if file_order(lf.file) < file_order(cursor.file):
                    cursor.offsets[lf.file] = lf.path.stat().st_size
                elif lf.file == cursor.file:
                    cursor.offsets[lf.file] = offset_after(lf.path, cursor.seq)
            if cursor.file not in names:
                log.warning("forwarder: %s: the stream's last record is in %s, not on disk",
                            cursor.table, cursor.file)
        cursor.synced = True

    async def _publish(self, cursor: TableCursor, records: list[tuple[str, bytes]]) -> int:
        from nats.js.errors import APIError

        table = cursor.table
        n = 0
        for file, line in records:
            try:
                seq = record_seq(line)
            except ValueError as exc:
                raise DamagedRecord(file, line, str(exc)) from None
            headers = {"Nats-Msg-Id": msg_id(table, file, seq),
                       "Nats-Expected-Last-Subject-Sequence": str(cursor.subject_seq)}
            try:
                ack = await self._js.publish(audit_subject(table), line[:-1], timeout=2,
                                             stream=STREAM, headers=headers)
            except APIError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    cursor.synced = False  # the stream moved (or lost) under us: ask again
                raise
            cursor.subject_seq, cursor.file, cursor.seq = int(ack.seq), file, seq
            if ack.duplicate:
                self.duplicates += 1
            else:
                self.published += 1
            n += 1
        return n


class WitnessListener:
    """Follows ``shoewarden.witness.<table>`` for the table: each checkpoint of its chain
    the floor signed that is newer than the last one handed on goes to ``post`` (the
    table's runtime records it as a ``witness_checkpoint`` input). It asks the stream for
    the subject's last message every ``poll`` seconds: only the latest matters, and an
    outage costs nothing but the checkpoints signed meanwhile (the next one covers them).
    Runs on a thread of its own, like the forwarder; the engine never waits for it."""

    def __init__(self, table: str, connection: Connection, post: Callable[[Checkpoint], None],
                 *, poll: float = 0.5, check: Callable[[Checkpoint], str | None] | None = None
                 ) -> None:
        self.table = table
        self.connection = connection
        self.post = post
        self.poll = poll
        #: why a checkpoint is not to be recorded (its signature does not verify), or None
        self.check = check
        self.received = 0
        self.refused = 0
        self.last: tuple[Any, int] | None = None
        self._refused_last: tuple[str, str] | None = None  # (sig, ts): said once
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="shoewarden-witness-in", daemon=True)

    def start(self) -> WitnessListener:
        load_nats()
        self._thread.start()
        return self

    def stop(self, timeout: float = 5) -> None:
        self._stop.set()
        self._thread.join(timeout)

    async def _main(self) -> None:
        from nats.js.errors import NotFoundError

        from controller.audit.witness import parse_checkpoints
        from floor.core import file_order

        nc = None
        subject = f"{WITNESS_SUBJECT}.{self.table}"
        while not self._stop.is_set():
            try:
                if nc is None:
                    nc = await self.connection.connect()
                try:
                    msg = await nc.jetstream().get_last_msg(STREAM, subject)
                except NotFoundError:
                    msg = None
                if msg is not None:
                    for cp in parse_checkpoints(bytes(msg.data), subject):
                        place = (file_order(cp.file), cp.seq)
                        if cp.table != self.table or (self.last is not None
                                                      and place <= self.last):
                            continue
                        why = self.check(cp) if self.check is not None else None
                        if why is not None:  # the last message stays: said once
                            if self._refused_last != (cp.sig, cp.ts):
                                self._refused_last = (cp.sig, cp.ts)
                                self.refused += 1
                                log.warning("witness listener: %s: refused, not recorded: %s",
                                            subject, why)
                            continue
                        self.last = place
                        self.received += 1
                        self.post(cp)
            except Exception as exc:  # the broker gone, a message that is no checkpoint
                log.info("witness listener: %s", exc)
            await asyncio.sleep(self.poll)
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()


def witness_listener_for_log(log_file: str | Path, urls: list[str], connection: Connection,
                             post: Callable[[Checkpoint], None], *,
                             check: Callable[[Checkpoint], str | None] | None = None
                             ) -> WitnessListener:
    """``--witness-from URL``: the listener of the table whose log is ``log_file``, started
    (the credentials and TLS files of ``connection``; ``check``: see
    :class:`WitnessListener`)."""
    table = table_of_log(Path(log_file), "--witness-from")
    servers = check_servers(urls)
    return WitnessListener(table, Connection(servers, connection.creds,
                                             connection.tls_ca), post, check=check).start()


def _check_creds(path: str) -> None:
    """A NATS credentials file holds a user JWT and an NKEY seed, each after its BEGIN line.
    nats-py reads the JWT in a loop that ends only at its BEGIN line: a file without one
    hung every connection attempt, the forwarder silent (a review)."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16)
    except OSError as exc:
        raise ForwardError(f"--nats-creds {path}: {exc.strerror or exc}") from None
    missing = [what for what, mark in (("user JWT", b"BEGIN NATS USER JWT"),
                                       ("NKEY seed", b"BEGIN USER NKEY SEED"))
               if mark not in data]
    if missing:
        raise ForwardError(f"--nats-creds {path}: not a NATS credentials file (no "
                           f"{' and no '.join(missing)}: `nsc generate creds` writes one)")


def connection_from(args: Any) -> Connection:
    """``--publish URL`` (repeated or comma-separated: a cluster), ``--nats-creds FILE``,
    ``--nats-ca FILE``, checked before anything starts."""
    if getattr(args, "witness_from", None):
        check_servers(args.witness_from)
    servers = check_servers(args.publish or getattr(args, "witness_from", None) or [])
    for option, path in (("--nats-creds", args.nats_creds), ("--nats-ca", args.nats_ca)):
        if path is not None and not Path(path).is_file():
            raise ForwardError(f"{option} {path}: no such file")
    if args.nats_creds is not None:
        _check_creds(args.nats_creds)
    if args.nats_ca is not None:
        import ssl

        try:
            ssl.create_default_context(cafile=args.nats_ca)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ForwardError(f"--nats-ca {args.nats_ca}: not a PEM file of CA "
                               f"certificates ({exc})") from None
    return Connection(servers, creds=args.nats_creds, tls_ca=args.nats_ca,
                      disclosure=getattr(args, "disclosure", None) or "live")


def table_of_log(path: Path, option: str) -> str:
    """The table whose log is ``path``, laid out as ``<root>/<table>/<table>-<date>.jsonl``
    (what the forwarder and the witness listener follow)."""
    from controller.audit.files import parse_log_name

    parsed = parse_log_name(path.name)
    if parsed is None or path.parent.name != parsed.table:
        raise ForwardError(f"{option} needs the log in a log directory (--log DIR), not "
                           f"the file {path}")
    return parsed.table


def forwarder_for_log(log_file: str | Path, connection: Connection) -> Forwarder:
    """The forwarder of the table whose log is ``log_file`` (``<root>/<table>/…``), started
    on a thread of this process. ``run``/``bench --publish`` start it in a child process
    instead (:mod:`floor.forward_process`); this is the former design, kept for the
    benchmark's comparison and for many simulated tables in one process."""
    path = Path(log_file)
    table = table_of_log(path, "--publish")
    fwd = Forwarder([path.parent.parent], connection, tables=frozenset({table}))
    fwd.start()
    return fwd


def finish(fwd: Forwarder, timeout: float = 10.0) -> str:
    """At the table's end: let the forwarder send what is left (up to ``timeout``), then stop
    it. Returns a line for the operator."""
    fwd.stop_when_done = True
    fwd.join(timeout)
    fwd.stop(1)
    return finish_line(fwd.published, fwd.held, fwd.alive_after_stop(), timeout)


def finish_line(published: int, held: int, behind: bool, timeout: float, *,
                duplicates: int = 0) -> str:
    """The operator's line at the table's end, the thread's or the child process's."""
    return (f"published {published} record(s) to NATS"
            + (f" ({duplicates} already in the stream)" if duplicates else "")
            + (f"; {held} held back until their shoe ends (disclosure shoe)"
               if held else "")
            + (f"; the broker did not take the rest in {timeout:.0f} s: "
               "`shoewarden forward` sends them" if behind else ""))
