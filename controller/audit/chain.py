"""The hash chain's writer: seals each record into the next link and appends it.

:class:`HashChainWriter` owns the chain (``seq``, ``prev``, ``mac``) and one
``threading.Lock``: sequence assignment, time stamp, hashing, the write and the fsync of
a record all happen under it, so concurrent callers always produce an unbroken chain. (A
hash chain kept in a structlog processor would be guarded by a different lock than the
one that orders the writes, and threads would interleave records out of chain order.)

Two ways in:

* :meth:`HashChainWriter.msg` takes any record as keyword arguments, checks it (a
  ``kind``, no reserved keys, float-free plain JSON) and writes it through at once. It is
  the structlog *final logger* behind :class:`~controller.audit.writer.AuditLog`'s dict
  methods.
* :meth:`HashChainWriter.append` is the card path: a record whose parts come from typed
  values (an input event, an engine output), already split around ``hash`` where the
  canonical key order puts it, so it is encoded once, with no check walk. Records that
  need no fsync wait in a small batch that :meth:`flush` writes with one ``os.write``: a
  table writes each input and the outputs it caused in two writes (``input`` policy: the
  input is fsynced before the engine sees it), a bulk ``check --log`` under ``none`` in
  one a batch.

Durability policies: ``input`` (fsync after every ``input`` and ``header`` record; the
default, write-ahead), ``every`` (fsync after every record), ``none`` (no fsync: bulk
replay and benchmarks).
"""

from __future__ import annotations

import binascii
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from controller.audit.anchors import Anchor
from controller.audit.canonical import (
    GENESIS,
    MAC_ALG,
    RESERVED_KEYS,
    check_json_value,
    key_id,
    seal_line,
)
from controller.audit.errors import AuditLogError
from controller.audit.modes import FILE_MODE
from controller.audit.opening import (
    TornCut,
    check_anchored,
    cut_torn_tail,
    fsync_dir,
    open_existing,
    read_head,
)
from controller.audit.sinks import FileSink, Sink, StreamSink
from controller.audit.timestamps import Clock, stamp_for, utc_now
from controller.audit.verify import ChainStart

try:  # POSIX: refuse a second writer on the same file (it would fork the chain).
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]


class Durability(StrEnum):
    """When the writer fsyncs (docs/audit-log.md, "Durability")."""

    INPUT = "input"  # after every input and header record: write-ahead (the default)
    EVERY = "every"  # after every record
    NONE = "none"  # never: bulk replay, benchmarks


DURABILITY_POLICIES = tuple(p.value for p in Durability)
"""``input``: fsync after every ``input`` and ``header`` record (default, write-ahead);
``every``: fsync after every record; ``none``: flush only (bulk replay, benchmarks)."""

FSYNC_KINDS = frozenset({"input", "header"})
"""Record kinds fsynced under the default ``input`` policy."""

BATCH_BYTES = 1 << 16
"""Records waiting for a flush are written once they hold this much (``none`` policy)."""

_SORTED = orjson.OPT_SORT_KEYS
_sha256 = hashlib.sha256
_hex = binascii.hexlify  # a digest's hex as bytes (hexdigest gives str)
_dumps = orjson.dumps

ContextKey = tuple[str | None, int, int | None, str]
"""The context every record carries as one tuple: table, shoe, round, state (what
``TableEngine.context_key()`` gives)."""



def context_dict(context: ContextKey) -> dict[str, Any]:
    """A :data:`ContextKey` as the record's members."""
    table, shoe, round_, state = context
    return {"table": table, "shoe": shoe, "round": round_, "state": state}


def check_durability(durability: str) -> Durability:
    """``durability`` as a policy, or ``ValueError`` naming the allowed ones."""
    try:
        return Durability(durability)
    except ValueError:
        allowed = ", ".join(repr(p) for p in DURABILITY_POLICIES)
        raise ValueError(f"durability must be one of {allowed}, not {durability!r}") from None


class HashChainWriter:
    """Seals records into the chain and appends them to one sink; see the module docstring.

    ``msg(**fields)`` (alias ``info``) takes the record without ``seq``, ``ts``, ``prev``
    and ``hash`` and returns the sealed record.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        durability: str = "input",
        clock: Clock | None = None,
        seq: int = 0,
        prev: str = GENESIS,
        key: bytes | None = None,
        mac: str = GENESIS,
        chain: Mapping[str, Any] | None = None,
        torn_cut: TornCut | None = None,
        batch_bytes: int = BATCH_BYTES,
    ) -> None:
        self._sink = sink
        self._durability = check_durability(durability)
        self._sync_all = self._durability is Durability.EVERY
        self._sync_kinds = FSYNC_KINDS if self._durability is Durability.INPUT else frozenset()
        self._sync_input = self._sync_all or "input" in self._sync_kinds
        self._clock: Clock = clock or utc_now
        self._clocked = clock is not None  # an injected clock is read once a record
        self._stamp: Callable[[], str] = stamp_for(clock)
        self._seq = seq
        self._prev = prev
        self._key = key
        self._mac = mac
        self._pending_chain = dict(chain) if chain else None
        self._first_chain = self._pending_chain  # written into the file's first record
        self._chain_start = prev  # the head before this file's first record
        self.torn_cut = torn_cut
        self._lock = threading.Lock()
        self._closed = False
        self._broken: BaseException | None = None
        # records sealed but not yet written (append without fsync), and the chain head as
        # it stands in the file: a batch that cannot be written rolls the head back to it
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._batch_limit = batch_bytes
        self._frames: dict[ContextKey, tuple[bytes, bytes, bytes]] = {}
        self._written = (seq, prev, mac)

    # NB: do not give this class __len__ or __bool__: structlog's lazy proxy
    # replaces a falsy wrapped logger with its default logger factory.

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: str = "input",
        clock: Clock | None = None,
        key: bytes | None = None,
        start: ChainStart | None = None,
        chain: Mapping[str, Any] | None = None,
        verify: bool = True,
        repair_torn: bool = False,
        anchored: Sequence[Anchor] = (),
    ) -> HashChainWriter:
        """Open ``path`` for appending, creating it (mode 0o640) or continuing its chain.

        An existing non-empty file is checked first (its tail verified with ``verify``,
        else its last record only); a file that does not verify is refused with
        :class:`AuditLogError` naming the path and line. With ``repair_torn`` a torn last
        line (no ``\\n``) is cut off first and described in :attr:`torn_cut` (crash
        recovery; see :func:`controller.audit.recovery.recover`).

        ``key``: write a keyed log (each record gets a ``mac``); a keyed file can
        only be continued with its key and an unkeyed one never gets one.
        ``start`` and ``chain`` apply to an empty file only: where its chain
        starts (a rotated set continues from the previous file's head) and the
        ``chain`` field written into its first record.

        ``anchored``: the anchors recorded for this file; an existing file they show was
        cut or added to is refused before anything is cut or written
        (:func:`~controller.audit.opening.check_anchored`).
        """
        policy = check_durability(durability)
        name = os.fspath(path)
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        created = True
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            created = False
            fd = os.open(name, flags)
        try:
            if created:
                os.fchmod(fd, FILE_MODE)  # exact mode whatever the umask
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise AuditLogError(
                        "already open by another writer (two writers would fork the chain)",
                        path=name,
                    ) from None
            if not created and anchored:
                check_anchored(fd, name, anchored)
            torn = (cut_torn_tail(fd, name, policy, key, verify) if repair_torn
                    else None)
            empty = os.fstat(fd).st_size == 0
            if empty:
                begin = start or ChainStart()
                seq, prev, mac = begin.seq, begin.hash, begin.mac
                first_chain = dict(chain or {})
                if key is not None:
                    first_chain["mac"] = {"alg": MAC_ALG, "key_id": key_id(key)}
            else:
                seq, prev = read_head(fd, name)
                mac = open_existing(name, seq, prev, key=key, verify=verify)
                first_chain = {}
            if created and policy is not Durability.NONE:
                fsync_dir(Path(name).resolve().parent)
        except BaseException:
            os.close(fd)
            raise
        return cls(FileSink(fd, name), durability=policy, clock=clock, seq=seq, prev=prev,
                   key=key, mac=mac, chain=first_chain or None, torn_cut=torn)

    @classmethod
    def to_stream(cls, stream: Any, *, clock: Clock | None = None) -> HashChainWriter:
        """A writer on a text stream (e.g. ``io.StringIO``), starting a new chain; never fsyncs,
        and writes each record through at once (a stream is read while it is written)."""
        return cls(StreamSink(stream), durability="none", clock=clock, batch_bytes=0)

    # ------------------------------------------------------------------ view

    @property
    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last record sealed; (0, GENESIS) before the first."""
        with self._lock:
            return self._seq, self._prev

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def broken(self) -> bool:
        """A write or fsync failed: nothing more is written."""
        return self._broken is not None

    @property
    def mac_head(self) -> str:
        """The ``mac`` of the last record (``GENESIS`` for an unkeyed log or before the first)."""
        with self._lock:
            return self._mac

    @property
    def keyed(self) -> bool:
        return self._key is not None

    @property
    def durability(self) -> Durability:
        return self._durability

    @property
    def name(self) -> str:
        return self._sink.name

    # ------------------------------------------------------------------ writing

    def msg(self, /, **fields: Any) -> dict[str, Any]:
        """Seal ``fields`` into the next record, write it, fsync per policy; return the record."""
        kind = fields.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"audit record needs a non-empty string 'kind', got {kind!r}")
        reserved = RESERVED_KEYS.intersection(fields)
        if reserved:
            raise ValueError(
                f"audit record fields {sorted(reserved)} are set by the writer, not the caller"
            )
        check_json_value(fields)
        sync = self._sync_all or kind in self._sync_kinds
        with self._lock:
            self._usable()
            record = dict(fields)
            record["seq"] = self._seq + 1
            record["ts"] = self._stamp()
            record["prev"] = self._prev
            if self._pending_chain is not None:
                record["chain"] = self._pending_chain
            line, digest, mac = seal_line(record, self._key, self._mac)
            if mac is not None:
                record["mac"] = mac
            record["hash"] = digest
            self._advance(record["seq"], digest, mac)
            self._batch.append(line)
            self._write_batch(sync)
        return record

    info = msg

    def append(self, kind: str, records: Iterable[tuple[Mapping[str, Any] | None,
                                                        dict[str, Any]]],
               *, flush: bool = False) -> None:
        """Seal and queue records of one ``kind`` from typed parts: each is ``(before,
        after)``, ``before`` holding the members whose keys sort before ``"hash"``
        (``event``), ``after`` the rest (``kind``, the context, the payload's other members;
        ``seq``, ``ts`` and ``prev`` are added to it). The caller vouches that the values
        are float-free plain JSON (they come from typed values).

        Records the policy fsyncs are written and fsynced at once, with whatever waits
        before them; any other waits for :meth:`flush`, ``flush=True`` or a full batch."""
        sync = self._sync_all or kind in self._sync_kinds
        with self._lock:
            if self._closed or self._broken is not None:
                self._usable()
            batch = self._batch
            seq, prev, size = self._seq, self._prev, self._batch_bytes
            stamp = self._stamp
            ts = None if self._clocked else stamp()  # the system clock: one reading a batch
            for before, after in records:
                seq += 1
                after["seq"] = seq
                after["ts"] = ts or stamp()
                after["prev"] = prev
                if self._pending_chain is not None:
                    before = {**(before or {}), "chain": self._pending_chain}
                    self._pending_chain = None
                try:
                    if self._key is not None:
                        raise TypeError("keyed: the general seal")
                    c = _dumps(after, option=_SORTED)
                    if before:
                        a = _dumps(before, option=_SORTED)[:-1]
                        prev = _sha256(a + b"," + c[1:]).hexdigest()
                        line = b"".join((a, b',"hash":"', prev.encode(), b'",', c[1:], b"\n"))
                    else:
                        prev = _sha256(c).hexdigest()
                        line = b"".join((b'{"hash":"', prev.encode(), b'",', c[1:], b"\n"))
                except (orjson.JSONEncodeError, TypeError):  # keyed, or an int beyond 64 bits
                    line, prev, mac = seal_line({**(before or {}), **after}, self._key,
                                                self._mac)
                    if mac is not None:
                        self._mac = mac
                batch.append(line)
                size += len(line)
            self._seq, self._prev, self._batch_bytes = seq, prev, size
            if sync or flush or size >= self._batch_limit:
                self._write_batch(sync)

    def append_input(self, payload: bytes, context: ContextKey, line: int | None) -> None:
        """The card path's ``input`` record: ``payload`` the canonical encoding of its
        event, ``line`` its source line or None, ``context`` the engine's
        (``TableEngine.context_key()``). Fsynced at once under the ``input`` and ``every``
        policies (with whatever waits before it).

        A card-path record's shape is fixed, so its line is laid out here around its
        payload by one ``%`` of a template made once per context (they change a few times
        a round): the same bytes as :meth:`append` gives the same record
        (tests/test_audit_card_path.py) at a fraction of its cost. A keyed log and a
        file's first record (``chain``) take :meth:`append`."""
        if self._key is not None or self._pending_chain is not None:
            self._append_general("input", (payload,), context, line, flush=False)
            return
        with self._lock:
            if self._closed or self._broken is not None:
                self._usable()
            frame = self._frames.get(context) or self._frames_for(context)
            seq = self._seq + 1
            # (the keys' order: event, hash, kind, line, prev, round, seq, shoe, state,
            # table, ts)
            if line is None:
                hashed = frame[0] % (payload, self._prev.encode(), seq, self._stamp().encode())
            else:
                hashed = frame[1] % (payload, line, self._prev.encode(), seq,
                                     self._stamp().encode())
            head = _hex(_sha256(hashed).digest())
            cut = len(payload) + 9  # '{"event":' and the payload
            text = b"".join((hashed[:cut], b',"hash":"', head, b'"', hashed[cut:], b"\n"))
            self._batch.append(text)
            self._seq, self._prev = seq, head.decode()
            self._batch_bytes = size = self._batch_bytes + len(text)
            if self._sync_input or size >= self._batch_limit:
                self._write_batch(self._sync_input)

    def append_outputs(self, payloads: Sequence[bytes], context: ContextKey, *,
                       flush: bool = False) -> None:
        """The card path's ``output`` records of one input, each ``payload`` an output's
        canonical encoding, laid out as :meth:`append_input` lays an input; written with
        ``flush`` (or a full batch), fsynced under ``every``."""
        if self._key is not None or self._pending_chain is not None:
            self._append_general("output", payloads, context, None, flush=flush)
            return
        sync = self._sync_all
        with self._lock:
            if self._closed or self._broken is not None:
                self._usable()
            template = (self._frames.get(context) or self._frames_for(context))[2]
            batch = self._batch
            seq, size = self._seq, self._batch_bytes
            head = self._prev.encode()  # the hash as bytes until the run ends
            stamp = self._stamp
            ts = None if self._clocked else stamp().encode()
            for payload in payloads:
                seq += 1
                hashed = template % (payload, head, seq, ts or stamp().encode())
                head = _hex(_sha256(hashed).digest())
                text = b"".join((b'{"hash":"', head, b'",', hashed[1:], b"\n"))
                batch.append(text)
                size += len(text)
            self._seq, self._prev, self._batch_bytes = seq, head.decode(), size
            if sync or flush or size >= self._batch_limit:
                self._write_batch(sync)

    def _append_general(self, kind: str, payloads: Sequence[bytes], context: ContextKey,
                        line: int | None, *, flush: bool) -> None:
        """Card-path records by way of :meth:`append` (a keyed log, a file's first record)."""
        for payload in payloads:
            self.append(kind, self._parts(kind, (json.loads(payload),), context_dict(context),
                                          line), flush=flush)

    def _frames_for(self, context: ContextKey) -> tuple[bytes, bytes, bytes]:
        """The templates of a context's records, each to be filled with ``%``: an input
        without a line (payload, prev, seq, ts), with one (payload, line, prev, seq, ts),
        an output (payload, prev, seq, ts) — every record as it is hashed, without its
        ``hash`` member."""
        table, shoe, round_, state = context
        after = b"".join((b'","prev":"%s","round":', _dumps(round_).replace(b"%", b"%%"),
                          b',"seq":%d,"shoe":', _dumps(shoe).replace(b"%", b"%%"),
                          b',"state":', _dumps(state).replace(b"%", b"%%"),
                          b',"table":', _dumps(table).replace(b"%", b"%%"),
                          b',"ts":"%s"}'))
        frames = (b'{"event":%s,"kind":"input' + after,
                  b'{"event":%s,"kind":"input","line":%d' + after[1:],
                  b'{"kind":"output","output":%s' + after[1:])
        if len(self._frames) >= 256:
            self._frames.clear()
        self._frames[context] = frames
        return frames

    @staticmethod
    def _parts(kind: str, payloads: Sequence[Mapping[str, Any]], context: Mapping[str, Any],
               line: int | None) -> list[tuple[Mapping[str, Any] | None, dict[str, Any]]]:
        if kind == "input":
            after = {"kind": "input", **context}
            if line is not None:
                after["line"] = line
            return [({"event": p}, dict(after)) for p in payloads]
        return [(None, {"kind": "output", **context, "output": p}) for p in payloads]

    def flush(self) -> None:
        """Write the records that wait (one ``os.write``); no fsync."""
        with self._lock:
            if self._batch and self._broken is None and not self._closed:
                self._write_batch(False)

    def _usable(self) -> None:
        if self._closed:
            raise AuditLogError("audit log is closed", path=self._sink.name)
        if self._broken is not None:
            raise AuditLogError(
                f"audit log is unusable after a failed write ({self._broken!r})",
                path=self._sink.name,
            )

    def _advance(self, seq: int, digest: str, mac: str | None) -> None:
        self._seq = seq
        self._prev = digest
        if mac is not None:
            self._mac = mac
        self._pending_chain = None

    def _write_batch(self, sync: bool) -> None:
        """Write the batch whole (or nothing: the sink cuts a failed write back), then fsync
        if asked. A batch that cannot be written is dropped and the chain's head goes back
        to the last record in the file, so the next record links to what is really there;
        the error names the records lost."""
        batch = self._batch
        first, last = self._written[0] + 1, self._seq
        self._batch = []
        self._batch_bytes = 0
        try:
            self._sink.write(batch[0] if len(batch) == 1 else b"".join(batch))
        except OSError as exc:
            cut_back = getattr(exc, "cut_back", False)
            if cut_back:
                if self._written[1] == self._chain_start:  # the file's first record is lost
                    self._pending_chain = self._first_chain
                self._seq, self._prev, self._mac = self._written
            else:
                self._broken = exc  # the file may end in a partial line: never write again
            lost = f"seq {first}" if first == last else f"seq {first}–{last}"
            raise AuditLogError(
                f"write failed at {lost}: {exc.strerror or exc}"
                + ("; the log still ends with its last whole record" if cut_back else ""),
                path=self._sink.name) from exc
        self._written = (self._seq, self._prev, self._mac)
        if sync:
            try:
                self._sink.sync()
            except OSError as exc:
                # The record may not be durable, and after a failed fsync the kernel may
                # have dropped it: never write after this (no fsync retry either).
                self._broken = exc
                raise AuditLogError(
                    f"fsync failed at seq {self._seq}: {exc.strerror or exc}",
                    path=self._sink.name) from exc

    def sync(self) -> None:
        """Write what waits and fsync now, whatever the durability policy (no-op on a stream)."""
        with self._lock:
            if not self._closed and self._broken is None:
                if self._batch:
                    self._write_batch(True)
                else:
                    self._sink.sync()

    def close(self) -> None:
        """Write what waits, fsync (unless the policy is ``none``) and close; idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._broken is None:
                    if self._batch:
                        self._write_batch(self._durability is not Durability.NONE)
                    elif self._durability is not Durability.NONE:
                        self._sink.sync()
            finally:
                self._closed = True
                self._sink.close()
