"""The floor: follow the tables' logs, check each chain, keep each table's state, raise alerts.

One thread (:meth:`Floor.run`) polls the log directories (:mod:`floor.follow`), verifies
each new run of a table's records against the chain so far
(:func:`controller.audit.verify.verify_run`, the verifier ``audit verify`` uses), folds the
good records into the table's :class:`~floor.tablestate.TableState`, turns warning and
critical deviations into alerts, and commits records, position and alerts to the index in
one transaction (:mod:`floor.store`). Every change is handed to ``publish`` (the live
stream). Acknowledgements are written to the floor's own hash-chained log first, then to
the index; a restart replays that log into the index, so an acknowledgement is never lost.

The transport ends at :meth:`Floor.ingest`: the database floor of issue 12 hands it the
records it consumes from the message bus instead of lines read from files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from controller.audit import AuditLog, AuditLogError, open_table_log, verify_file
from controller.audit.files import parse_log_name
from controller.audit.verify import ChainStart, verify_run
from controller.audit.witness import Checkpoint, WitnessSigner
from floor.alerts import (
    CHAIN_BREAK,
    CHAIN_NEW,
    FLOOR_RULE,
    LOG_REWRITTEN,
    TABLE_SILENT,
    Alert,
    AlertDraft,
    from_deviation,
)
from floor.follow import READ_SLICE, Chunk, LogFile, file_size, read_new, scan
from floor.store import FilePosition, LiveRow, RunCommit, SqlIndex
from floor.tablestate import TableState

log = logging.getLogger(__name__)

#: the floor's own log is a "table" of this id under ``--log`` (never followed as a table)
FLOOR_LOG_ID = "floor"
Publish = Callable[[dict[str, Any]], None]
#: how often the follower lists the log directories (new tables and files, an older file
#: grown); between listings it reads only each table's newest file: a floor of hundreds of
#: tables polls a few hundred file sizes every 20 ms, not every directory
RESCAN_EVERY = 0.5
#: while :attr:`Floor.defer_live` (a consumer with records already waiting), the tables'
#: live states are saved at most this often (seconds), the newest of each
LIVE_EVERY = 0.1


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def file_order(name: str) -> tuple[dt.date, int, str]:
    """A log file's place in its table's chain: by date, then part."""
    parsed = parse_log_name(name)
    return (parsed.date, parsed.part, name) if parsed else (dt.date.min, 0, name)


def parse_ts(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class AckError(Exception):
    """An acknowledgement that cannot be taken (no such alert, already acked, no name)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class TableWatch:
    """A followed table: its files' positions and its state."""

    table: str
    state: TableState
    files: dict[str, FilePosition] = field(default_factory=dict)
    last_file: str | None = None  # the newest file that holds records the floor accepted

    def head(self) -> FilePosition | None:
        return self.files.get(self.last_file) if self.last_file else None


class Floor:
    """Follows ``roots``; ``store`` is the index; ``audit_dir`` the floor's own log (acks).

    ``keep_records``: index every record (the floor; needed for round look-ups) or not (the
    dealer display, which only shows the live state). ``tables``: follow only these ids.
    """

    def __init__(self, roots: list[Path], store: SqlIndex, *, audit_dir: Path | None = None,
                 publish: Publish | None = None, keep_records: bool = True,
                 tables: frozenset[str] | None = None, silent_after: float = 120.0,
                 poll_interval: float = 0.02, clock: Callable[[], float] = time.time,
                 slice_bytes: int = READ_SLICE, yield_gil: bool = False,
                 files_on_disk: bool = True, witness: WitnessSigner | None = None) -> None:
        self.roots = [Path(r) for r in roots]
        self.store = store
        self.audit_dir = audit_dir
        self.publish: Publish = publish or (lambda _event: None)
        self.keep_records = keep_records
        self.only = tables
        self.silent_after = silent_after
        self.poll_interval = poll_interval
        self.clock = clock
        #: when this floor began to listen: a table's silence is judged from then at the
        #: earliest (a floor restarted after ten minutes down called every open table
        #: silent before it had taken in what they wrote meanwhile — a review)
        self.listening_since = clock()
        #: how much of a file one ingest takes, and whether to let other threads run between
        #: ingests: the dealer display shares its process (and the GIL) with the engine thread,
        #: so it works in small slices and yields after each, and the engine never waits for
        #: a Python switch interval (5 ms) behind it
        self.slice_bytes = slice_bytes
        self.yield_gil = yield_gil
        #: False when the records arrive over NATS (floor.consume): there are no files here
        #: to check again at a restart; the stream and the index are what the floor read
        self.files_on_disk = files_on_disk
        #: the floor as a witness: a checkpoint of the table's chain signed at every round
        #: end it accepts, committed with the records; ``witness_outbox`` (a list, when a
        #: transport publishes them: floor.consume) collects them for publication
        self.witness = witness
        self.witness_outbox: list[Checkpoint] | None = None
        #: the tables' live states committed and not saved yet, the newest of each (table,
        #: file); saved after every commit, or — while ``defer_live`` is set by a consumer
        #: that has more records waiting — every LIVE_EVERY s and when it has none
        #: (:meth:`save_live_states`): for other floor processes to serve; this one serves
        #: from memory, and alerts never wait for it
        self._live: dict[tuple[str, str], LiveRow] = {}
        self._live_saved = 0.0
        self.defer_live = False
        self.tables: dict[str, TableWatch] = {}
        self.alerts: dict[int, Alert] = {}
        self.lock = threading.RLock()  # tables and alerts: the follower writes, the web reads
        self.audit: AuditLog | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_silence_check = 0.0
        self._found: dict[str, list[LogFile]] | None = None
        self._last_scan = 0.0
        self.records_ingested = 0
        #: the runs ingested inside :meth:`pipelined`, waiting for its commit
        self._group: list[tuple[RunCommit, bool]] | None = None
        #: tables whose last commit failed: reloaded from the index before the next ingest
        self._stale: set[str] = set()
        self._skip = frozenset({FLOOR_LOG_ID})
        self._restore()

    # ------------------------------------------------------------------ restart

    def _restore(self) -> None:
        """Back to where the index says: positions, alerts, acks (replayed from the floor's
        own log), each table's state (refolded from its indexed records), and a check that
        what was read is still what the files hold."""
        for alert in self.store.alerts():
            self.alerts[alert.id] = alert
        self._replay_acks()
        by_table: dict[str, list[FilePosition]] = {}
        for pos in self.store.positions():
            by_table.setdefault(pos.table, []).append(pos)
        for table, positions in by_table.items():
            if self.only is not None and table not in self.only:
                continue  # a floor of some tables (the display, a repair) folds no other
            self._load_table(table, positions)
            for pos in positions:
                self._check_unchanged(pos)

    def _load_table(self, table: str, positions: list[FilePosition]) -> None:
        """A table as the index holds it: its files' positions, its state refolded."""
        positions.sort(key=lambda p: file_order(p.file))
        watch = self.tables[table] = TableWatch(table, TableState(table))
        for pos in positions:
            watch.files[pos.file] = pos
            if pos.seq and pos.offset:
                watch.last_file = pos.file
        if self.keep_records:
            for name, line in self.store.records(table, [p.file for p in positions]):
                watch.state.feed(orjson.loads(line), name)

    # ------------------------------------------------------------------ several floors

    def catch_up(self, table: str) -> bool:
        """Take in what other floor processes committed of ``table`` since this one last
        looked (a shared index only): each file's head from the index, the records between
        folded into the table's state, the table's alerts. True when anything changed.

        A file this floor is ahead on (its run staged in a group not yet committed) is left
        as it is; the commit never moves a head back (``commit_runs``)."""
        if not self.store.shared:
            return False
        committed = self.store.positions_of(table)
        with self.lock:
            if not committed and table not in self.tables:
                return False  # no such table on the floor (yet)
            watch = self._watch(table)
            changed = False
            for db in sorted(committed, key=lambda p: file_order(p.file)):
                mem = watch.files.get(db.file)
                if mem is not None and (mem.seq > db.seq or (mem.seq, mem.offset, mem.broken)
                                        == (db.seq, db.offset, db.broken)):
                    continue
                if self.keep_records and db.seq > (mem.seq if mem is not None else 0):
                    feed = watch.state.feed
                    for line in self.store.records_between(
                            table, db.file, mem.seq if mem is not None else 0, db.seq):
                        feed(orjson.loads(line), db.file)
                watch.files[db.file] = db
                if db.seq and db.offset and (watch.last_file is None or file_order(
                        db.file) >= file_order(watch.last_file)):
                    watch.last_file = db.file
                changed = True
        if changed:
            self._merge_alerts(self.store.alerts_of(table))
            self.publish({"type": "table", "table": table,
                          "summary": self.table_summary(table), "seq": watch.state.last_seq})
        return changed

    def sync(self) -> None:
        """Every table and alert other floor processes committed (a shared index only): what
        the pages and the API of this floor serve, whichever floor took the records in."""
        if not self.store.shared:
            return
        for table in sorted({p.table for p in self.store.positions()}):
            self.catch_up(table)
        self._merge_alerts(self.store.alerts_of())

    def _merge_alerts(self, alerts: list[Alert]) -> None:
        """Alerts (and acknowledgements) from the index that this floor's memory lacks."""
        fresh, acked = [], []
        with self.lock:
            for alert in alerts:
                known = self.alerts.get(alert.id)
                if known is None:
                    self.alerts[alert.id] = alert
                    fresh.append(alert)
                elif known.is_open and not alert.is_open:
                    known.acked_by, known.acked_at, known.note = (alert.acked_by,
                                                                  alert.acked_at, alert.note)
                    acked.append(known)
        for alert in fresh:
            self.publish({"type": "alert", "alert": alert.to_dict()})
        for alert in acked:
            self.publish({"type": "ack", "alert": alert.to_dict()})

    def _resync(self) -> None:
        """After a commit that failed, the tables it held back to what the index holds: the
        floor had moved their positions and state past records that are not in the index,
        and would otherwise skip them (or, over NATS, take their redelivery for a
        duplicate). Raises while the index cannot be read; nothing is ingested until then."""
        if not self._stale:
            return
        by_table: dict[str, list[FilePosition]] = {t: [] for t in self._stale}
        for pos in self.store.positions():
            if pos.table in by_table:
                by_table[pos.table].append(pos)
        with self.lock:
            for table, positions in by_table.items():
                self._load_table(table, positions)
        self._stale.clear()

    def _commit_runs(self, runs: list[tuple[RunCommit, bool]]) -> None:
        try:
            made = self.store.commit_runs([run for run, _ in runs])
        except BaseException:
            if self.keep_records:  # (without records, there is nothing to refold from)
                self._stale.update(run.pos.table for run, _ in runs)
            raise
        self._committed(runs, made)

    def _check_unchanged(self, pos: FilePosition) -> None:
        """The bytes the floor read before its restart must still verify to the same head."""
        if pos.broken or not pos.offset or not self.files_on_disk:
            return
        size = file_size(Path(pos.path))
        why = None
        if size < 0:
            why = f"{pos.file} is gone: the floor had read {pos.seq} record(s) of it"
        elif size < pos.offset:
            why = (f"{pos.file} is shorter than the {pos.offset} bytes the floor had read: "
                   f"records up to seq {pos.seq} were cut")
        else:
            result = verify_file(pos.path, end=pos.offset)
            if not result.ok:
                why = f"{pos.file} changed after the floor read it: {result}"
            elif (result.head_seq, result.head) != (pos.seq, pos.hash):
                why = (f"{pos.file} changed after the floor read it: head seq "
                       f"{result.head_seq} {result.head[:12]}…, the floor read seq {pos.seq} "
                       f"{pos.hash[:12]}…")
        if why is not None:
            pos.broken = why
            self.store.mark_broken(pos.table, pos.file, why)
            self._raise([AlertDraft(pos.table, pos.file, pos.seq, LOG_REWRITTEN, "critical",
                                    why, FLOOR_RULE, utc_now())])

    # ------------------------------------------------------------------ the floor's own log

    def _open_audit(self) -> AuditLog | None:
        if self.audit is None and self.audit_dir is not None:
            self.audit = open_table_log(self.audit_dir, FLOOR_LOG_ID, durability="every")
        return self.audit

    def _replay_acks(self) -> None:
        """Acks in the floor's log that the index lacks (a crash between the two writes)."""
        if self.audit_dir is None:
            return
        from controller.audit.files import table_files
        from controller.audit.records import LogReader

        for rec in LogReader(table_files(self.audit_dir, FLOOR_LOG_ID)):
            r = rec.record
            if r.get("kind") != "ack" or not isinstance(r.get("alert"), dict):
                continue
            a = r["alert"]
            for alert in self.alerts.values():
                if alert.key == (a.get("table"), a.get("file"), a.get("seq"), a.get("code")) \
                        and alert.is_open:
                    alert.acked_by, alert.acked_at = str(r.get("by")), str(r.get("ts"))
                    alert.note = str(r.get("note") or "")
                    self.store.ack(alert.id, alert.acked_by, alert.acked_at, alert.note)

    def write_own(self, kind: str, **payload: Any) -> dict[str, Any]:
        """A record of the floor's own doing into its hash-chained log (fsynced); the
        record as written. Raises :class:`AuditLogError` when the log cannot be written."""
        audit = self._open_audit()
        if audit is None:
            raise AuditLogError("the floor has no log of its own (--log DIR)")
        with self.lock:
            return audit.write(kind, {"table": FLOOR_LOG_ID}, **payload)

    def alerts_of_file(self, table: str, file: str) -> list[Alert]:
        """A file's alerts, open or acknowledged, oldest first."""
        with self.lock:
            return sorted((a for a in self.alerts.values()
                           if a.table == table and a.file == file), key=lambda a: a.id)

    def refold(self, table: str) -> None:
        """A table's state folded again from the index, its files in order, and its live
        row saved (after records of an older file were taken in: the fold went out of
        order)."""
        with self.lock:
            self._load_table(table, self.store.positions_of(table))
            st = self._watch(table).state
            summary = orjson.dumps(self.table_summary(table))
        if st.file is not None:
            self.store.save_live(table, st.file, st.last_seq, st.last_ts, summary, [])

    def ack(self, alert_id: int, by: str, note: str) -> Alert:
        """Acknowledge an alert: into the floor's hash-chained log (fsynced), then the index."""
        if not isinstance(by, str) or not by.strip():
            raise AckError("ack: 'by' must name the person acknowledging (a non-empty text)")
        if not isinstance(note, str):
            raise AckError("ack: 'note' must be a text")
        if self.store.shared:  # raised or acknowledged by another floor process
            self._merge_alerts(self.store.alerts_of())
        with self.lock:
            alert = self.alerts.get(alert_id)
            if alert is None:
                raise AckError(f"no alert {alert_id}", 404)
            if not alert.is_open:
                raise AckError(f"alert {alert_id} was acknowledged by {alert.acked_by} at "
                               f"{alert.acked_at}", 409)
            audit = self._open_audit()
            at = utc_now()
            if audit is not None:
                record = audit.write("ack", {"table": FLOOR_LOG_ID}, by=by.strip(), note=note,
                                     alert={"id": alert.id, "table": alert.table,
                                            "file": alert.file, "seq": alert.seq,
                                            "code": alert.code, "severity": alert.severity})
                at = str(record["ts"])
            if not self.store.ack(alert.id, by.strip(), at, note):  # another floor, just now
                self._merge_alerts(self.store.alerts_of(alert.table))
                raise AckError(f"alert {alert_id} was acknowledged by {alert.acked_by} at "
                               f"{alert.acked_at}", 409)
            alert.acked_by, alert.acked_at, alert.note = by.strip(), at, note
        self.publish({"type": "ack", "alert": alert.to_dict()})
        return alert

    # ------------------------------------------------------------------ following

    def _watch(self, table: str) -> TableWatch:
        watch = self.tables.get(table)
        if watch is None:
            watch = self.tables[table] = TableWatch(table, TableState(table))
        return watch

    def poll(self, *, rescan: bool = False) -> int:
        """One pass over every followed log: returns the records accepted. ``rescan``: list
        the directories now, whenever they were last listed."""
        now = self.clock()
        full = rescan or self._found is None or now - self._last_scan >= RESCAN_EVERY
        if full:  # list the directories: new tables, new files, older files grown
            self._found = scan(self.roots, self._skip)
            self._last_scan = now
        assert self._found is not None
        total = 0
        with self.pipelined():  # one transaction; a run is sent while the next is checked
            for table, files in self._found.items():
                if self.only is not None and table not in self.only:
                    continue
                watch = self.tables.get(table)
                latest = watch.last_file if watch is not None and not full else None
                for lf in files:
                    if latest is not None and file_order(lf.file) < file_order(latest):
                        continue  # between listings only the newest file is read
                    while True:
                        n = self._follow(table, lf)
                        total += n
                        if n == 0:
                            break
        if now - self._last_silence_check >= 1.0:
            self._last_silence_check = now
            self._check_silence(now)
        return total

    def _follow(self, table: str, lf: LogFile) -> int:
        with self.lock:
            watch = self._watch(table)
            pos = watch.files.get(lf.file)
        if pos is not None and pos.broken:
            return 0
        chunk = read_new(lf, pos.offset if pos else 0, self.slice_bytes)
        if chunk is None:
            return 0
        n = self.ingest(table, chunk)
        if self.yield_gil:
            time.sleep(0)  # release the GIL: the engine thread goes first
        return n

    def ingest(self, table: str, chunk: Chunk, *, late: bool = False) -> int:
        """Verify, fold and index one run of whole lines of a table's file. ``late``: the
        records of a file older than the table's newest are expected (a repair,
        floor.repair), not a ``CHAIN_BREAK``."""
        lf = chunk.log
        if self._group is None:
            self._resync()
        with self.lock:
            watch = self._watch(table)
            pos = watch.files.get(lf.file)
            first = pos is None or pos.offset == 0
            drafts: list[AlertDraft] = []
            if first:
                result = verify_run(chunk.lines, start=None, chain=False, source=str(lf.path))
            else:
                assert pos is not None
                chain = orjson.loads(pos.chain) if pos.chain else None
                result = verify_run(chunk.lines, start=ChainStart(pos.seq, pos.hash, pos.mac),
                                    chain=chain, source=str(lf.path))
            good = chunk.lines[:result.records]
            records = [orjson.loads(raw) for raw in good]
            if pos is None:
                pos = FilePosition(table, lf.file, str(lf.path), 0, 0, "", "", None)
            if first and records:
                chain_field = records[0].get("chain")
                pos.chain = orjson.dumps(chain_field).decode() if chain_field else None
                drafts += self._link(watch, lf, records[0])
            elif not late and watch.last_file is not None and lf.file != watch.last_file \
                    and records and file_order(lf.file) < file_order(watch.last_file):
                drafts.append(AlertDraft(
                    table, lf.file, records[0]["seq"], CHAIN_BREAK, "critical",
                    f"table {table}: {len(records)} record(s) appended to {lf.file} (from seq "
                    f"{records[0]['seq']}) after the table had moved on to {watch.last_file}",
                    FLOOR_RULE, utc_now()))
            rows = []
            state = watch.state
            feed, file = state.feed, lf.file  # (per record: a backlog is ~10^5 of them)
            for raw, record in zip(good, records, strict=True):
                row = feed(record, file)
                if row is not None:
                    draft = from_deviation(table, row)
                    if draft is not None:
                        drafts.append(draft)
                rows.append((record["seq"], record["hash"], raw[:-1]))
            if records:
                pos.seq, pos.hash = result.head_seq, result.head
                pos.mac = result.mac_head
                if watch.last_file is None or file_order(lf.file) >= file_order(watch.last_file):
                    watch.last_file = lf.file
            pos.offset = chunk.offset + sum(len(raw) for raw in good)
            if not result.ok:
                seq = result.first_bad_seq if result.first_bad_seq is not None else \
                    result.head_seq + 1
                why = (f"table {table}: the hash chain breaks in {lf.file} at line "
                       f"{result.first_bad_line} (seq {seq}): {result.reason}"
                       + (f" [{result.problem}: {result.detail}]" if result.detail else
                          f" [{result.problem}]" if result.problem else ""))
                pos.broken = why
                drafts.append(AlertDraft(table, lf.file, seq, CHAIN_BREAK, "critical", why,
                                         FLOOR_RULE, utc_now()))
            watch.files[lf.file] = pos
            signed = self._checkpoints(table, lf.file, records)
            self.records_ingested += len(records)
            run = RunCommit(dataclasses.replace(pos), rows if self.keep_records else [],
                            drafts, signed)
            if self._group is None:
                self._commit_runs([(run, bool(records))])
        if self._group is not None:
            self._group.append((run, bool(records)))
            self.store.stage(run)  # the database takes it while the next run is checked
        return len(records)

    def _committed(self, runs: list[tuple[RunCommit, bool]], made: list[list[Alert]]
                   ) -> None:
        """After the commit: the runs' new alerts and their tables' changes to the live
        stream, and their checkpoints to the transport's outbox."""
        events: list[dict[str, Any]] = []
        with self.lock:
            for (run, any_records), alerts in zip(runs, made, strict=True):
                if run.checkpoints and self.witness_outbox is not None:
                    self.witness_outbox += run.checkpoints
                for alert in alerts:
                    self.alerts[alert.id] = alert
                    events.append({"type": "alert", "alert": alert.to_dict()})
                if any_records or alerts:
                    table = run.pos.table
                    events.append({"type": "table", "table": table,
                                   "summary": self.table_summary(table),
                                   "seq": self._watch(table).state.last_seq})
            live = self._live_rows(runs) if self.keep_records else []
        for event in events:
            self.publish(event)
        for row in live:
            key = (row[0], row[1])
            waiting = self._live.pop(key, None)  # (re-inserted: the newest file last)
            if waiting is not None and waiting[5]:  # rounds an earlier commit touched
                rounds = {(r[0], r[1]): r for r in waiting[5]}
                rounds.update({(r[0], r[1]): r for r in row[5]})
                row = (row[0], row[1], row[2], row[3], row[4], list(rounds.values()))
            self._live[key] = row
        if not self.defer_live or time.monotonic() - self._live_saved >= LIVE_EVERY:
            self.save_live_states()

    def save_live_states(self) -> None:
        """Save the tables' live states that wait (:attr:`_live`), in one call."""
        rows = list(self._live.values())
        self._live.clear()
        self._live_saved = time.monotonic()
        if not rows:
            return
        try:
            self.store.save_lives(rows)
        except Exception:  # derived from the records: the next run writes it again
            log.warning("floor: the live state of %s could not be saved",
                        ", ".join(dict.fromkeys(row[0] for row in rows)), exc_info=True)

    def _live_rows(self, runs: list[tuple[RunCommit, bool]]) -> list[LiveRow]:
        """For each table the runs changed: its live state (the ``/api/tables`` row) and
        the rounds they touched, as :meth:`~floor.store.SqlIndex.save_live` takes them."""
        since: dict[tuple[str, str], int] = {}
        for run, _ in runs:
            if run.rows:
                key = (run.pos.table, run.pos.file)
                since[key] = min(since.get(key, run.rows[0][0]), run.rows[0][0])
        out: list[LiveRow] = []
        for table in dict.fromkeys(t for t, _ in since):
            st = self._watch(table).state
            touched = {}
            for r in (*st.previous_shoe_rounds, *st.rounds, st.current):
                if r is None or r.file is None:
                    continue
                first = since.get((table, r.file))
                if first is not None and (r.end_seq is None or r.end_seq >= first):
                    touched[(r.file, r.shoe, r.round)] = (r.shoe, r.round, r.seq, r.end_seq,
                                                          r.ts, r.text)
            by_file: dict[str, list[Any]] = {}
            for (file, *_), row in touched.items():
                by_file.setdefault(file, []).append(row)
            last = st.file or next(iter(by_file), "")
            summary = orjson.dumps(self.table_summary(table))
            mine = by_file.pop(last, [])
            # an earlier file's rounds first: the table's state is the newest file's, last
            out += [(table, f, st.last_seq, st.last_ts, summary, rows)
                    for f, rows in by_file.items()]
            out.append((table, last, st.last_seq, st.last_ts, summary, mine))
        return out

    @contextlib.contextmanager
    def pipelined(self) -> Iterator[None]:
        """Within this block, :meth:`ingest` sends each run to the index ahead of its
        commit (:meth:`~floor.store.SqlIndex.stage`: PostgreSQL takes the rows on the other
        core while the floor checks the next run) and the block commits them all in one
        transaction as it ends, then publishes their alerts. A record is in the index only
        once the block is done: whoever acknowledges records does so after it."""
        if self._group is not None:
            yield
            return
        self._resync()
        group: list[tuple[RunCommit, bool]] = []
        self._group = group
        try:
            yield
        finally:
            self._group = None
            if group:
                self._commit_runs(group)

    def _checkpoints(self, table: str, file: str, records: list[dict[str, Any]]
                     ) -> list[Checkpoint]:
        """A signed checkpoint of the chain at every round end among ``records`` (verified
        records only: a break stops the run before it)."""
        if self.witness is None:
            return []
        out = []
        for r in records:
            o = r.get("output")
            if r.get("kind") == "output" and isinstance(o, dict) and o.get("type") == "note" \
                    and o.get("kind") == "round":
                out.append(self.witness.sign(table, file, int(r["seq"]), str(r["hash"]),
                                             utc_now()))
        return out

    def _link(self, watch: TableWatch, lf: LogFile, first: dict[str, Any]) -> list[AlertDraft]:
        """A file's first record against the table's chain so far (rotation)."""
        table = watch.table
        head = watch.head()
        chain = first.get("chain") if isinstance(first.get("chain"), dict) else {}
        assert isinstance(chain, dict)
        seq = int(first.get("seq") or 0)
        cont = chain.get("continues")
        new = chain.get("new_chain")
        if isinstance(new, dict):
            return [AlertDraft(table, lf.file, seq, CHAIN_NEW, "warning",
                               f"table {table}: {lf.file} starts a new chain: "
                               f"{new.get('reason')}", FLOOR_RULE, utc_now())]
        if head is None or head.file == lf.file:
            return []  # the first file the floor sees of this table: its chain as it says
        if isinstance(cont, dict) and (cont.get("file"), cont.get("seq"), cont.get("hash")) == (
                head.file, head.seq, head.hash):
            return []
        said = (f"it continues {cont.get('file')} at seq {cont.get('seq')}"
                if isinstance(cont, dict) else "it starts a chain of its own with no reason")
        return [AlertDraft(table, lf.file, seq, CHAIN_BREAK, "critical",
                           f"table {table}: {lf.file} does not continue the chain: the floor "
                           f"read {head.file} to seq {head.seq}, {said}", FLOOR_RULE,
                           utc_now())]

    def raise_alerts(self, drafts: list[AlertDraft]) -> None:
        """Alerts of something done to the floor from outside its own reading (a repair):
        indexed, kept, and published as every alert is."""
        self._raise(drafts)

    def _raise(self, drafts: list[AlertDraft]) -> None:
        with self.lock:
            made = self.store.add_alerts(drafts)
            for alert in made:
                self.alerts[alert.id] = alert
        for alert in made:
            self.publish({"type": "alert", "alert": alert.to_dict()})

    def _check_silence(self, now: float) -> None:
        drafts = []
        with self.lock:
            for watch in self.tables.values():
                st = watch.state
                last = parse_ts(st.last_ts)
                if st.is_open and last is not None and st.file is not None and \
                        now - max(last, self.listening_since) > self.silent_after:
                    drafts.append(AlertDraft(
                        watch.table, st.file, st.last_seq, TABLE_SILENT, "warning",
                        f"table {watch.table} is open ({st.state}) but wrote nothing for "
                        f"{int(now - last)} s (last record seq {st.last_seq} at {st.last_ts})",
                        FLOOR_RULE, utc_now()))
            made = self.store.add_alerts(drafts) if drafts else []
            for alert in made:
                self.alerts[alert.id] = alert
        for alert in made:
            self.publish({"type": "alert", "alert": alert.to_dict()})

    # ------------------------------------------------------------------ views

    def open_alerts(self, table: str | None = None) -> list[Alert]:
        with self.lock:
            return [a for a in self.alerts.values()
                    if a.is_open and (table is None or a.table == table)]

    def table_summary(self, table: str) -> dict[str, Any]:
        """``GET /api/tables`` row of one table."""
        from floor.alerts import worst

        with self.lock:
            st = self._watch(table).state
            alerts = self.open_alerts(table)
            return {"table": table, "profile": st.profile, "game": st.game,
                    "state": st.state, "shoe": st.shoe, "round": st.round,
                    "cards_left": st.cards_left, "last_ts": st.last_ts,
                    "open_alerts": len(alerts), "worst": worst(alerts),
                    "prompt": st.prompt, "faults": len(st.open_faults),
                    "chain_ok": not any(p.broken for p in self._watch(table).files.values())}

    # ------------------------------------------------------------------ the thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="floor-follower", daemon=True)
        self._thread.start()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                n = self.poll()
            except Exception:  # the follower never dies silently: logged, and on it goes
                log.exception("floor: a poll failed")
                n = 0
            if n == 0:
                self._stop.wait(self.poll_interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.audit is not None:
            self.audit.close()
            self.audit = None
