"""The hash-chained audit log writer.

Two layers:

* :class:`HashChainWriter` is the structlog *wrapped logger* (the final
  logger). Its ``msg`` method receives the finished event dict as keyword
  arguments and, under one ``threading.Lock`` it owns, assigns ``seq``, ``ts``
  and ``prev``, computes ``hash``, writes the canonical line, and fsyncs per the
  durability policy. The chain lives here and nowhere else: a hash chain kept in
  a processor would be guarded by a different lock than the one that orders the
  writes, and threads would interleave records out of chain order.
* :class:`AuditLog` is the front the engine runner uses (``header``, ``input``,
  ``output``, ``write``). Every call goes through a structlog bound logger built
  with :func:`structlog.wrap_logger` over the writer; structlog's global
  configuration is never touched.

Options beyond the plain chain: a ``key`` (every record then carries a chained
HMAC-SHA-256 ``mac``), a chain start for a new file of a rotated set
(:class:`ChainStart` plus the ``chain`` field written into its first record),
an :class:`~controller.audit.anchors.AnchorSink` that receives the head at
every shoe end, table close, open and close, and the explicit cut of a torn
last line used by crash recovery (``repair_torn``).

The writer knows no devices and no engine: it receives plain dicts.
See docs/audit-log.md for the format.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from controller import jsontext
from controller.audit.canonical import (
    GENESIS,
    MAC_ALG,
    RESERVED_KEYS,
    check_json_value,
    key_id,
    record_hash,
    seal_line,
)
from controller.audit.modes import FILE_MODE
from controller.audit.verify import ChainStart, VerifyResult, verify_tail
from controller.jsontext import JsonTextError

if TYPE_CHECKING:
    from controller.audit.anchors import AnchorSink

try:  # POSIX: refuse a second writer on the same file (it would fork the chain).
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

DURABILITY_POLICIES = ("input", "every", "none")
"""``input``: fsync after every ``input`` and ``header`` record (default, write-ahead);
``every``: fsync after every record; ``none``: flush only (bulk replay, benchmarks)."""

FSYNC_KINDS = frozenset({"input", "header"})
"""Record kinds fsynced under the default ``input`` policy."""

CONTEXT_KEYS = ("table", "shoe", "round", "state")
"""The context every record carries (``null`` where it does not apply)."""

ANCHOR_STATES = {"shoe_complete": "shoe_end", "closed": "table_close"}
"""A ``transition`` output into one of these states makes :class:`AuditLog` anchor its head
(the value is the anchor's ``reason``). So does the end of every round (reason
``round_end``, the round's ``note``): a cut of a live table's log can then take at most the
round in progress with it unnoticed — anchors cost one small fsynced line per round."""

Clock = Callable[[], dt.datetime]


@dataclass(frozen=True)
class TornCut:
    """What ``repair_torn`` cut off the end of a log: the torn last line."""

    line: int  # 1-based line number of the torn line
    offset: int  # byte offset where it started (the new file size)
    bytes: int  # its length in bytes
    sha256: str  # SHA-256 (hex) of the bytes cut

    def to_record(self) -> dict[str, Any]:
        return {"line": self.line, "offset": self.offset, "bytes": self.bytes,
                "sha256": self.sha256}


class AuditLogError(Exception):
    """The audit log cannot be opened or written safely.

    ``path`` and ``line`` (1-based) locate the problem when it is in a file.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}: " if line is None else f"{path}: line {line}: "
        super().__init__(where + message)


def check_durability(durability: str) -> str:
    """Return ``durability`` if it is an allowed policy, else raise ``ValueError`` naming them."""
    if durability not in DURABILITY_POLICIES:
        allowed = ", ".join(repr(p) for p in DURABILITY_POLICIES)
        raise ValueError(f"durability must be one of {allowed}, not {durability!r}")
    return durability


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def format_ts(when: dt.datetime) -> str:
    """``when`` as ISO-8601 UTC, milliseconds, ``Z``: ``2026-11-21T10:15:30.123Z``."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"audit clock returned a naive datetime {when!r}; it must be tz-aware")
    utc = when.astimezone(dt.UTC)
    if utc.year >= 1000:  # isoformat is C and several times faster than strftime
        return utc.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- sinks


class _Sink(Protocol):
    name: str

    def write(self, data: bytes) -> None: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


class _FileSink:
    """An O_APPEND file descriptor: each record is one ``os.write`` (no user-space buffer)."""

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name
        self.size = os.fstat(fd).st_size  # where the last whole record ends

    def write(self, data: bytes) -> None:
        """Append ``data`` whole, or leave the file as it was: a write that fails part way
        (a full disk) is cut back to the end of the last whole record, so the log never
        ends in a half line of this writer's making. The :class:`OSError` then carries
        ``cut_back = True`` (False when even the cut failed)."""
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError as exc:
            try:
                os.ftruncate(self.fd, self.size)
                exc.cut_back = True  # type: ignore[attr-defined]
            except OSError:
                exc.cut_back = False  # type: ignore[attr-defined]
            raise
        self.size += len(data)

    def sync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class _StreamSink:
    """A text stream (e.g. ``io.StringIO``) for tests: write and flush, never fsync."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.name = getattr(stream, "name", None) or f"<{type(stream).__name__}>"

    def write(self, data: bytes) -> None:
        self.stream.write(data.decode("utf-8"))
        flush = getattr(self.stream, "flush", None)
        if flush is not None:
            flush()

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass  # the caller owns the stream


def _read_head(fd: int, path: str) -> tuple[int, str]:
    """The (seq, hash) of the last record of an open log file; (0, GENESIS) if it is empty.

    Refuses (AuditLogError with path and line) a torn or unparseable last line,
    or one whose hash does not match its content: appending would extend a
    broken chain. Recovery is a separate, explicit step.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return 0, GENESIS
    if os.pread(fd, 1, size - 1) != b"\n":
        raise AuditLogError(
            "torn last line (no newline terminator): the previous writer was interrupted; "
            "recover the log before appending",
            path=path,
            line=_count_newlines(fd, size) + 1,
        )
    # Read backwards from just before the final newline to the newline before it.
    end = size - 1
    pos, buf = end, b""
    while pos > 0:
        start = max(0, pos - 65536)
        buf = os.pread(fd, pos - start, start) + buf
        pos = start
        if b"\n" in buf:
            break
    last = buf[buf.rfind(b"\n") + 1 :]  # the whole last line (rfind is -1 for a one-line file)

    def bad(why: str) -> AuditLogError:
        return AuditLogError(
            f"last record {why}; refusing to append to a broken chain",
            path=path,
            line=_count_newlines(fd, size),
        )

    try:
        record = jsontext.loads(last)
    except JsonTextError as exc:
        raise bad(f"does not parse as JSON ({exc})") from None
    if not isinstance(record, dict):
        raise bad("is not a JSON object")
    seq, claimed = record.get("seq"), record.get("hash")
    if type(seq) is not int or seq < 1:
        raise bad(f"has no valid seq ({seq!r})")
    if not isinstance(claimed, str):
        raise bad("has no hash")
    body = {k: v for k, v in record.items() if k != "hash"}
    try:
        actual = record_hash(body)
    except (TypeError, ValueError) as exc:
        raise bad(f"cannot be re-encoded ({exc})") from None
    if actual != claimed:
        raise bad("hash mismatch: record was edited")
    return seq, claimed


def _count_newlines(fd: int, size: int) -> int:
    count, offset = 0, 0
    while offset < size:
        block = os.pread(fd, min(1 << 20, size - offset), offset)
        if not block:
            break
        count += block.count(b"\n")
        offset += len(block)
    return count


def _check_verified(result: VerifyResult, name: str, key: bytes | None, *,
                    where: str = "") -> str:
    """Raise unless a log verified and matches the key (or its absence); return the last mac."""
    if result.problem == "wrong-key":
        raise AuditLogError(f"{result.reason}; refusing to append{where}", path=name,
                            line=result.first_bad_line)
    if not result.ok and not result.keyed and key is not None and result.problem == "mac" \
            and result.first_bad_line == 1:
        raise AuditLogError("the log is not keyed (no MAC chain); it cannot be continued with a "
                            f"key: start a new file{where}", path=name, line=1)
    if not result.ok:
        detail = f" ({result.detail})" if result.detail else ""
        raise AuditLogError(
            f"chain does not verify: {result.reason}{detail}; refusing to append to a broken "
            f"chain (recover a torn log, or start a new file with a recorded reason){where}",
            path=name, line=result.first_bad_line)
    if result.keyed and key is None:
        raise AuditLogError("the log is keyed (its records carry a mac): open it with its key"
                            + where, path=name)
    return result.mac_head if key is not None else GENESIS


def _open_existing(name: str, seq: int, prev: str, *, key: bytes | None, verify: bool) -> str:
    """Check a non-empty log before appending; return its last ``mac`` (``GENESIS`` if none)."""
    if not verify:
        if key is not None:
            raise AuditLogError("a keyed log must be verified before it is continued", path=name)
        return GENESIS
    result = verify_tail(name, key=key)  # bounded: the whole chain is audit verify's job
    mac = _check_verified(result, name, key)
    if (result.head_seq, result.head) != (seq, prev):  # pragma: no cover - changed under the lock
        raise AuditLogError("the file changed while it was being verified", path=name)
    return mac


def _find_torn_tail(fd: int) -> tuple[int, bytes] | None:
    """(offset, bytes) of a last line without ``\\n``; None if the file ends with one."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    pos = size
    tail = b""
    while pos > 0:
        start = max(0, pos - 65536)
        block = os.pread(fd, pos - start, start)
        tail = block + tail
        pos = start
        if b"\n" in block:
            break
    torn = tail[tail.rfind(b"\n") + 1:]
    return size - len(torn), torn


def _cut_torn_tail(fd: int, name: str, durability: str, key: bytes | None,
                   verify: bool) -> TornCut | None:
    """Cut a last line without ``\\n`` back to the end of the last whole line; describe the cut.

    The whole records before it must verify first: a log that is damaged
    elsewhere is not touched.
    """
    found = _find_torn_tail(fd)
    if found is None:
        return None
    offset, torn = found
    line = _count_newlines(fd, offset) + 1
    if verify and offset:
        _check_verified(verify_tail(name, key=key, end=offset), name, key,
                        where=" (the torn last line was not cut)")
    os.ftruncate(fd, offset)
    if durability != "none":
        os.fsync(fd)
    return TornCut(line, offset, len(torn), hashlib.sha256(torn).hexdigest())


# --------------------------------------------------------------------------- writer


class HashChainWriter:
    """The structlog final logger: seals each event dict into the next chain record and writes it.

    ``msg(**fields)`` (alias ``info``) takes the record without ``seq``, ``ts``,
    ``prev`` and ``hash`` and returns the sealed record. Sequence assignment,
    time stamp, hashing, the write and the fsync all happen under the writer's
    own lock, so concurrent callers always produce an unbroken chain.
    """

    def __init__(
        self,
        sink: _Sink,
        *,
        durability: str = "input",
        clock: Clock | None = None,
        seq: int = 0,
        prev: str = GENESIS,
        key: bytes | None = None,
        mac: str = GENESIS,
        chain: Mapping[str, Any] | None = None,
        torn_cut: TornCut | None = None,
    ) -> None:
        self._sink = sink
        self._durability = check_durability(durability)
        self._clock: Clock = clock or _utc_now
        self._seq = seq
        self._prev = prev
        self._key = key
        self._mac = mac
        self._pending_chain = dict(chain) if chain else None
        self.torn_cut = torn_cut
        self._lock = threading.Lock()
        self._closed = False
        self._broken: BaseException | None = None

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
    ) -> HashChainWriter:
        """Open ``path`` for appending, creating it (mode 0o640) or continuing its chain.

        An existing non-empty file is verified first (the whole chain with
        ``verify``, else its last record only); a file that does not verify is
        refused with :class:`AuditLogError` naming the path and line. With
        ``repair_torn`` a torn last line (no ``\\n``) is cut off first and
        described in :attr:`torn_cut` (crash recovery; see
        :func:`controller.audit.recovery.recover`).

        ``key``: write a keyed log (each record gets a ``mac``); a keyed file can
        only be continued with its key and an unkeyed one never gets one.
        ``start`` and ``chain`` apply to an empty file only: where its chain
        starts (a rotated set continues from the previous file's head) and the
        ``chain`` field written into its first record.
        """
        check_durability(durability)
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
            torn = (_cut_torn_tail(fd, name, durability, key, verify) if repair_torn
                    else None)
            empty = os.fstat(fd).st_size == 0
            if empty:
                begin = start or ChainStart()
                seq, prev, mac = begin.seq, begin.hash, begin.mac
                first_chain = dict(chain or {})
                if key is not None:
                    first_chain["mac"] = {"alg": MAC_ALG, "key_id": key_id(key)}
            else:
                seq, prev = _read_head(fd, name)
                mac = _open_existing(name, seq, prev, key=key, verify=verify)
                first_chain = {}
            if created and durability != "none":
                _fsync_dir(Path(name).resolve().parent)
        except BaseException:
            os.close(fd)
            raise
        return cls(_FileSink(fd, name), durability=durability, clock=clock, seq=seq, prev=prev,
                   key=key, mac=mac, chain=first_chain or None, torn_cut=torn)

    @classmethod
    def to_stream(cls, stream: Any, *, clock: Clock | None = None) -> HashChainWriter:
        """A writer on a text stream (e.g. ``io.StringIO``), starting a new chain; never fsyncs."""
        return cls(_StreamSink(stream), durability="none", clock=clock)

    @property
    def head(self) -> tuple[int, str]:
        """(seq, hash) of the last record written; (0, GENESIS) before the first."""
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
    def durability(self) -> str:
        return self._durability

    @property
    def name(self) -> str:
        return self._sink.name

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
        sync = self._durability == "every" or (self._durability == "input" and kind in FSYNC_KINDS)
        with self._lock:
            if self._closed:
                raise AuditLogError("audit log is closed", path=self._sink.name)
            if self._broken is not None:
                raise AuditLogError(
                    f"audit log is unusable after a failed write ({self._broken!r})",
                    path=self._sink.name,
                )
            record = dict(fields)
            record["seq"] = self._seq + 1
            record["ts"] = format_ts(self._clock())
            record["prev"] = self._prev
            if self._pending_chain is not None:
                record["chain"] = self._pending_chain
            line, digest, mac = seal_line(record, self._key, self._mac)
            if mac is not None:
                record["mac"] = mac
            record["hash"] = digest
            try:
                self._sink.write(line)
            except OSError as exc:
                if not getattr(exc, "cut_back", False):
                    self._broken = exc  # the file may end in a partial line: never write again
                raise AuditLogError(
                    f"write failed at seq {record['seq']}: {exc.strerror or exc}"
                    + ("; the log still ends with its last whole record" if
                       getattr(exc, "cut_back", False) else ""), path=self._sink.name
                ) from exc
            try:
                if sync:
                    self._sink.sync()
            except OSError as exc:
                # The record may not be durable, and after a failed fsync the kernel may
                # have dropped it: never write after this (no fsync retry either).
                self._broken = exc
                raise AuditLogError(
                    f"fsync failed at seq {record['seq']}: {exc.strerror or exc}",
                    path=self._sink.name) from exc
            self._seq = record["seq"]
            self._prev = record["hash"]
            if self._key is not None:
                self._mac = record["mac"]
            self._pending_chain = None
        return record

    info = msg

    def sync(self) -> None:
        """fsync now, whatever the durability policy (no-op on a stream)."""
        with self._lock:
            if not self._closed and self._broken is None:
                self._sink.sync()

    def close(self) -> None:
        """fsync (unless the policy is ``none``) and close; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._broken is None and self._durability != "none":
                    self._sink.sync()
            finally:
                self._sink.close()


def _fsync_dir(directory: Path) -> None:
    """Make a newly created file's directory entry durable."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# --------------------------------------------------------------------------- structlog front


class _ChainLogger(structlog.BoundLoggerBase):
    """Bound logger with one method, ``record``, that runs the processors and calls ``msg``.

    It passes the fields as a dict (not as keyword arguments of a structlog
    method), so a payload key named ``event`` is an ordinary field.
    """

    def record(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        args, kw = self._process_event("msg", None, dict(fields))
        return self._logger.msg(*args, **kw)


def _as_kwargs(_logger: Any, _method: str,
               event_dict: MutableMapping[str, Any]) -> Mapping[str, Any]:
    """Last processor: hand the event dict over as ``**kwargs`` to ``HashChainWriter.msg``."""
    return event_dict


_MISSING = object()
_CONTEXT_TYPES = {"table": str, "state": str, "shoe": int, "round": int}


def _context_fields(context: Mapping[str, Any], *, require_all: bool) -> dict[str, Any]:
    if type(context) is dict and len(context) == len(CONTEXT_KEYS):
        out = {k: context.get(k, _MISSING) for k in CONTEXT_KEYS}
        if all(v is None or type(v) is _CONTEXT_TYPES[k] for k, v in out.items()):
            return out  # the engine's context(), as every input and output has it
    if not isinstance(context, Mapping):
        raise TypeError(f"context must be a mapping, got {type(context).__name__}")
    unknown = set(context) - set(CONTEXT_KEYS)
    if unknown:
        raise ValueError(
            f"unknown context key(s) {sorted(unknown)}; allowed: {', '.join(CONTEXT_KEYS)}"
        )
    if require_all:
        missing = [k for k in CONTEXT_KEYS if k not in context]
        if missing:
            raise ValueError(f"context is missing {missing}")
    out = {k: context.get(k) for k in CONTEXT_KEYS}
    for key in ("table", "state"):
        if out[key] is not None and not isinstance(out[key], str):
            raise TypeError(f"context {key!r} must be a str or None, got {out[key]!r}")
    for key in ("shoe", "round"):
        if out[key] is not None and type(out[key]) is not int:
            raise TypeError(f"context {key!r} must be an int or None, got {out[key]!r}")
    return out


class AuditLog:
    """The audit log as the engine runner sees it. Thread-safe; a context manager.

    Every method returns the sealed record it wrote (``seq``, ``ts``, ``prev`` and
    ``hash`` included).
    """

    def __init__(self, writer: HashChainWriter, *, anchors: AnchorSink | None = None,
                 table: str | None = None) -> None:
        self._writer = writer
        self._anchors = anchors
        self._table = table
        #: anchors that could not be written (disk full, permissions …), in all
        self.anchor_failures = 0
        self._anchor_trouble: list[str] = []  # failures not yet taken (one per failing spell)
        self._anchors_failing = False
        self._log = structlog.wrap_logger(
            writer,
            processors=[_as_kwargs],
            wrapper_class=_ChainLogger,
            context_class=dict,
            cache_logger_on_first_use=False,
        )
        # bound once: the lazy proxy binds anew on every call (11% of a record's cost)
        self._bound: _ChainLogger = self._log.bind()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: str = "input",
        clock: Clock | None = None,
        key: bytes | None = None,
        anchors: AnchorSink | None = None,
        table: str | None = None,
        start: ChainStart | None = None,
        chain: Mapping[str, Any] | None = None,
        verify: bool = True,
        repair_torn: bool = False,
    ) -> AuditLog:
        """Open (create, or append to and continue the chain of) the log file at ``path``.

        The options are :meth:`HashChainWriter.open`'s, plus ``anchors`` (where
        the head is published: at open, shoe end, table close and close) and
        ``table`` (the table named in the anchors until a record names one).
        """
        writer = HashChainWriter.open(path, durability=durability, clock=clock, key=key,
                                      start=start, chain=chain, verify=verify,
                                      repair_torn=repair_torn)
        log = cls(writer, anchors=anchors, table=table)
        try:
            log.anchor("open")
        except BaseException:
            writer.close()
            raise
        return log

    @classmethod
    def to_stream(cls, stream: Any, clock: Clock | None = None) -> AuditLog:
        """A log on a text stream such as ``io.StringIO`` (tests): a new chain, no fsync."""
        return cls(HashChainWriter.to_stream(stream, clock=clock))

    @property
    def head(self) -> tuple[int, str]:
        """(last seq, last hash); (0, GENESIS) for an empty log."""
        return self._writer.head

    @property
    def writer(self) -> HashChainWriter:
        return self._writer

    @property
    def anchors(self) -> AnchorSink | None:
        return self._anchors

    @property
    def table(self) -> str | None:
        """The table of the last record that named one (or the one given at open)."""
        return self._table

    def anchor(self, reason: str) -> dict[str, Any] | None:
        """Publish the current head (seq, hash) to the anchor sink, if there is one.

        An anchor that cannot be written never stops the log (the log is the evidence; the
        anchor only guards its tail): it returns None, is counted in
        :attr:`anchor_failures`, and the first failure of a spell waits in
        :meth:`take_anchor_trouble` for the session to feed as an input, so the log says
        so and the pit is alerted."""
        if self._anchors is None:
            return None
        seq, head = self._writer.head
        try:
            record = self._anchors.write(table=self._table, file=self._writer.name, seq=seq,
                                         hash=head, reason=reason,
                                         ts=format_ts(self._writer.clock()))
        except OSError as exc:
            self.anchor_failures += 1
            if not self._anchors_failing:
                self._anchor_trouble.append(
                    f"the {reason} anchor (seq {seq}) could not be written to "
                    f"{self._anchors.path or 'syslog'}: {exc.strerror or exc}")
            self._anchors_failing = True
            return None
        self._anchors_failing = False
        return record

    def take_anchor_trouble(self) -> list[str]:
        """Anchor failures not yet reported (at most one per spell of failures)."""
        trouble, self._anchor_trouble = self._anchor_trouble, []
        return trouble

    @property
    def logger(self) -> Any:
        """The structlog bound logger (lazy proxy) every record goes through."""
        return self._log

    def header(
        self,
        *,
        software: Mapping[str, Any],
        table: str | None,
        profile: Mapping[str, Any],
        settings: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Write a ``header`` record: software {name, version}, table, full profile, settings."""
        if not isinstance(software, Mapping) or not {"name", "version"} <= set(software):
            raise ValueError(f"software must be a dict with 'name' and 'version', got {software!r}")
        ctx = _context_fields({"table": table}, require_all=False)
        return self._emit(
            "header",
            ctx,
            {"software": dict(software), "profile": dict(profile), "settings": dict(settings)},
        )

    def input(
        self, event: Mapping[str, Any], *, line: int | None, context: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Write an ``input`` record: the event's canonical dict and its source line (if any)."""
        payload: dict[str, Any] = {"event": dict(event)}
        if line is not None:
            if type(line) is not int:
                raise TypeError(f"line must be an int or None, got {line!r}")
            payload["line"] = line
        return self._emit("input", _context_fields(context, require_all=True), payload)

    def output(self, output: Mapping[str, Any], *, context: Mapping[str, Any]) -> dict[str, Any]:
        """Write an ``output`` record (state change, prompt, deviation …).

        A transition into ``shoe_complete`` or ``closed`` then anchors the head
        (reasons ``shoe_end`` and ``table_close``) when there is an anchor sink.
        """
        record = self._emit(
            "output", _context_fields(context, require_all=True), {"output": dict(output)}
        )
        if self._anchors is not None:
            kind = output.get("type")
            reason = (ANCHOR_STATES.get(output.get("to"))  # type: ignore[arg-type]
                      if kind == "transition" else
                      "round_end" if kind == "note" and output.get("kind") == "round" else None)
            if reason is not None:
                self.anchor(reason)
        return record

    def write(self, kind: str, context: Mapping[str, Any], /, **payload: Any) -> dict[str, Any]:
        """Write a record of any ``kind``; context keys left out are written as null."""
        return self._emit(kind, _context_fields(context, require_all=False), payload)

    def _emit(
        self, kind: str, context: dict[str, Any], payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        clash = (set(CONTEXT_KEYS) | {"kind"}).intersection(payload)
        if clash:
            raise ValueError(f"payload keys {sorted(clash)} clash with the record's own fields")
        fields = {"kind": kind, **context, **payload}
        record = self._bound.record(fields)
        if context.get("table") is not None:
            self._table = context["table"]
        return record

    def sync(self) -> None:
        """fsync now, whatever the durability policy."""
        self._writer.sync()

    def close(self) -> None:
        """fsync (unless durability is ``none``), close the file and anchor its head; idempotent."""
        if self._writer.closed:
            return
        self._writer.close()
        if not self._writer.broken:
            self.anchor("close")

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
