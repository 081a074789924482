"""Verify a hash-chained audit log file (sets of files, anchors: :mod:`controller.audit.sets`).

The checks, in order, for each line (1-based):

1. it ends with ``\\n`` (a last line without one is a *torn* write);
2. it is UTF-8 and parses as a JSON object with no floats;
3. it has ``seq`` (int), ``ts``, ``kind``, ``prev`` and ``hash`` (str);
4. the line is byte-for-byte the canonical encoding of the record (no
   re-formatting, no duplicate keys);
5. ``hash`` equals the SHA-256 of the canonical encoding of the record
   without ``hash`` (otherwise the record was edited);
6. ``seq`` is the previous record's ``seq`` + 1;
7. ``prev`` equals the previous record's ``hash``;
8. ``mac``: a keyed file (its first record's ``chain.mac``) has a ``mac`` on
   every record, an unkeyed one on none; with the key, each ``mac`` is the
   HMAC-SHA-256 of the previous ``mac`` and the record without ``hash``/``mac``
   (after the link, so that a record deleted or moved is named as such).

The chain starts at seq 1 and ``GENESIS``, unless the file's first record
says (``chain.continues``) that it continues another file of a rotated set:
then it starts where that file ended. Verification stops at the first bad
line; the result names it, gives the reason, and classifies the tampering
(``problem``) with a diagnosis (``detail``), looking ahead where that helps
(a record that is missing here but found further on was *moved*, not deleted).
See docs/audit-log.md.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import operator
import os
import threading
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from controller import jsontext
from controller.audit.canonical import GENESIS, key_id
from controller.audit.linecheck import (
    DELETED,
    EDITED,
    INSERTED,
    MAC,
    REHASHED,
    REORDERED,
    START,
    TORN,
    WRONG_KEY,
    BadLine,
    ChainState,
    declared_key_id,
)
from controller.audit.rawlines import RawLines
from controller.audit.records import Meter
from controller.jsontext import JsonTextError

__all__ = [
    "DELETED", "EDITED", "INSERTED", "MAC", "REHASHED", "REORDERED", "START", "TORN",
    "WRONG_KEY", "ChainStart", "VerifyResult", "verify_file", "verify_lines", "verify_run",
    "verify_tail",
]

_RAW = operator.itemgetter(0)
#: lines checked as one run by :meth:`ChainState.block`
BLOCK_LINES = 128

@dataclass(frozen=True)
class ChainStart:
    """Where a file's chain starts: the ``seq``, ``hash`` and ``mac`` of the record before it."""

    seq: int = 0
    hash: str = GENESIS
    mac: str = GENESIS


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of verifying one file (or a list of lines).

    ``records`` counts the records that verified before the first bad one (all
    of them when ``ok``); ``first_bad_line`` is 1-based; ``first_bad_seq`` is the
    ``seq`` the bad record claims (None when it cannot be read); ``head`` is the
    hash of the last good record (the chain start if none) and ``head_seq`` its
    seq. ``problem`` classifies the first bad line (``edited``, ``rehashed``,
    ``deleted``, ``inserted``, ``reordered``, ``torn``, ``start``, ``mac``,
    ``wrong-key``) and ``detail`` explains it. ``chain`` is the first record's
    ``chain`` field (rotation, new chain, MAC), ``start`` where the chain starts.
    ``macs`` counts good records carrying a ``mac``; ``mac_checked`` says whether
    they were checked with a key; ``mac_head`` is the last good ``mac``.
    ``hashes`` holds the hash of each good record whose seq was asked for.
    """

    ok: bool
    records: int
    first_bad_seq: int | None
    first_bad_line: int | None
    reason: str | None
    source: str = "<log>"
    head: str = GENESIS
    head_seq: int = 0
    start: ChainStart = ChainStart()
    chain: Mapping[str, Any] | None = None
    problem: str | None = None
    detail: str | None = None
    macs: int = 0
    mac_checked: bool = False
    mac_head: str = GENESIS
    lines: int = 0
    hashes: Mapping[int, str] = field(default_factory=dict)

    @property
    def keyed(self) -> bool:
        """The file's first record declares a MAC chain."""
        return bool(self.chain and isinstance(self.chain.get("mac"), Mapping))

    def __str__(self) -> str:
        if self.ok:
            return f"{self.source}: ok, {self.records} records, head {self.head}"
        seq = "" if self.first_bad_seq is None else f" (seq {self.first_bad_seq})"
        text = f"{self.source}: line {self.first_bad_line}{seq}: {self.reason}"
        if self.detail:
            text += f" [{self.detail}]"
        return text


def verify_lines(
    lines: Iterable[str],
    *,
    source: str = "<log>",
    first_seq: int | None = None,
    first_prev: str | None = None,
    key: bytes | None = None,
) -> VerifyResult:
    """Verify the lines of a log, each *with* its ``\\n`` terminator (as iterating a file gives).

    ``first_seq`` and ``first_prev`` are what the first record must carry; by
    default (1 and ``GENESIS``, or where the first record's ``chain.continues``
    says the file starts).
    """
    start = None
    if first_seq is not None or first_prev is not None:
        start = ChainStart((first_seq or 1) - 1, first_prev or GENESIS)
    return _verify(((line, None) for line in lines), source, start, key, ())


def verify_file(
    path: str | os.PathLike[str],
    *,
    key: bytes | None = None,
    want_hashes: Collection[int] = (),
    start: ChainStart | None = None,
    end: int | None = None,
    meter: Meter | None = None,
    parallel: bool = True,
) -> VerifyResult:
    """Verify the log file at ``path`` (read as bytes, decoded line by line as UTF-8).

    With ``key``, every record must carry a correct ``mac``. ``want_hashes``:
    seqs whose record hash to return in ``VerifyResult.hashes`` (anchors).
    ``end``: verify only the first ``end`` bytes (a prefix ending at a line end).
    ``meter``: told the bytes read as it goes (a progress bar).

    A file of more than :data:`PARALLEL_BYTES` is verified in pieces on every core
    (:func:`_verify_parallel`); a piece that fails sends the whole file back to one core,
    so a damaged log is diagnosed exactly as before; ``parallel=False`` keeps it on one.
    """
    size = os.path.getsize(path) if end is None else end
    if parallel and start is None and size > PARALLEL_BYTES and (os.cpu_count() or 1) > 1:
        result = _verify_parallel(os.fspath(path), key, want_hashes, size, meter)
        if result is not None:
            return result
    with open(path, "rb") as f:
        return _verify(RawLines(f, limit=end, meter=meter), os.fspath(path), start, key,
                       want_hashes)


#: a log larger than this is verified on every core (about 50,000 records)
PARALLEL_BYTES = 16 << 20


def _segment(name: str, key: bytes | None, want: Collection[int], begin: int, end: int,
             start: ChainStart | None, chain: Mapping[str, Any] | bool | None
             ) -> VerifyResult:
    """Verify bytes ``begin``..``end`` of ``name`` (whole lines), from ``start``."""
    with open(name, "rb") as f:
        f.seek(begin)
        return _verify(RawLines(f, limit=end - begin), name, start, key, want, chain=chain)


def _verify_parallel(name: str, key: bytes | None, want: Collection[int], size: int,
                     meter: Meter | None) -> VerifyResult | None:
    """The file in one piece per core, each from the last record of the piece before it
    (trusted there, checked by that piece: its seq, hash and mac must be the head that
    piece ends on). The result of an intact file, or None: verify on one core."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    pieces = min(os.cpu_count() or 1, 8)
    with open(name, "rb") as f:
        first = _peek_record(f.readline())
        chain, _ = chain_start_of(first)
        cuts: list[tuple[int, ChainStart | None]] = [(0, None)]
        for i in range(1, pieces):
            f.seek(size * i // pieces)
            f.readline()  # to the next line start
            line = f.readline()
            rec = _peek_record(line)
            if not isinstance(rec, dict) or type(rec.get("seq")) is not int \
                    or not isinstance(rec.get("hash"), str) or f.tell() >= size:
                return None
            raw_mac = rec.get("mac")
            mac = raw_mac if isinstance(raw_mac, str) else GENESIS
            cuts.append((f.tell(), ChainStart(rec["seq"], rec["hash"], mac)))
    bounds = [(b, cuts[i + 1][0] if i + 1 < len(cuts) else size, s)
              for i, (b, s) in enumerate(cuts)]
    if any(b >= e for b, e, _ in bounds):
        return None
    # fork when this process runs one thread (`audit verify`): a child then starts at once,
    # where a spawned one first spends ~0.2 s importing; a process with threads (a floor)
    # must not fork, and spawns
    method = "fork" if threading.active_count() == 1 and os.name == "posix" else "spawn"
    with ProcessPoolExecutor(len(bounds), mp_context=get_context(method)) as pool:
        futures = [pool.submit(_segment, name, key, tuple(want), b, e, s,
                               False if s is None else chain) for b, e, s in bounds]
        results = []
        for (b, e, _), fut in zip(bounds, futures, strict=True):
            results.append(fut.result())
            if meter is not None:
                meter("verifying", e - b)
    heads = [(r.head_seq, r.head) for r in results[:-1]]
    starts = [(s.seq, s.hash) for _, _, s in bounds[1:] if s is not None]
    if not all(r.ok for r in results) or heads != starts:
        return None
    hashes: dict[int, str] = {}
    for r in results:
        hashes.update(r.hashes)
    last = results[-1]
    return VerifyResult(True, sum(r.records for r in results), None, None, None, name,
                        last.head, last.head_seq, results[0].start, results[0].chain, None,
                        None, sum(r.macs for r in results), key is not None, last.mac_head,
                        sum(r.lines for r in results), hashes)


#: how much of a log's end :func:`verify_tail` checks: about 10,000 records, a tenth of a
#: second — a restart must not wait for the whole day's chain (``audit verify`` checks it all)
TAIL_BYTES = 4 << 20


def verify_tail(
    path: str | os.PathLike[str],
    *,
    key: bytes | None = None,
    end: int | None = None,
    window: int | None = None,
) -> VerifyResult:
    """Verify the last ``window`` bytes of the log (of its first ``end`` bytes): what a
    writer checks before it continues a log, in bounded time whatever the log's length.

    A log no longer than the window is verified whole (:func:`verify_file`). Otherwise the
    first whole record in the window is the trusted start (its seq, hash and mac) and every
    record after it is checked as :func:`verify_file` checks them: hash, MAC with ``key``,
    sequence and links; the file's first record still says whether the log is keyed and
    with which key (a wrong key is found on line 1, by a full verification that stops
    there). Line numbers in the result count from the start of the file. What lies before
    the window is ``audit verify``'s to judge (docs/audit-log.md, "Opening a log")."""
    name = os.fspath(path)
    window = TAIL_BYTES if window is None else window
    size = os.path.getsize(name) if end is None else end
    if size <= window:
        return verify_file(name, key=key, end=end)
    with open(name, "rb") as f:
        first = _peek_record(f.readline())
        chain, _ = chain_start_of(first)
        if not isinstance(first, dict) or (
                key is not None and declared_key_id(first) not in (None, key_id(key))):
            return verify_file(name, key=key, end=end)  # fails on line 1, as it should
        f.seek(size - window)
        f.readline()  # the rest of a line cut by the window
        trusted_at = f.tell()
        trusted = _peek_record(f.readline())
        begin = f.tell()
        seq = trusted.get("seq") if isinstance(trusted, dict) else None
        digest = trusted.get("hash") if isinstance(trusted, dict) else None
        mac = trusted.get("mac") if isinstance(trusted, dict) else None
        if type(seq) is not int or not isinstance(digest, str) or begin > size:
            return verify_file(name, key=key, end=end)
        start = ChainStart(seq, digest, mac if isinstance(mac, str) else GENESIS)
        result = _verify(RawLines(f, limit=size - begin), name, start, key, (), chain=chain)
    if result.ok:
        return result
    before = _count_lines(name, trusted_at) + 1  # the lines up to the trusted record
    return replace(result, first_bad_line=(None if result.first_bad_line is None
                                           else result.first_bad_line + before),
                   lines=result.lines + before)


def _count_lines(name: str, end: int) -> int:
    n = 0
    with open(name, "rb") as f:
        while f.tell() < end:
            block = f.read(min(1 << 20, end - f.tell()))
            if not block:
                break
            n += block.count(b"\n")
    return n


def chain_start_of(record: Any) -> tuple[Mapping[str, Any] | None, ChainStart]:
    """The first record's ``chain`` field and the start it implies (seq 0 / GENESIS if none)."""
    chain = record.get("chain") if isinstance(record, dict) else None
    if not isinstance(chain, Mapping):
        return None, ChainStart()
    cont = chain.get("continues")
    if isinstance(cont, Mapping):
        seq, h = cont.get("seq"), cont.get("hash")
        raw_mac = cont.get("mac")
        mac = raw_mac if isinstance(raw_mac, str) else GENESIS
        if type(seq) is int and seq >= 0 and isinstance(h, str):
            return chain, ChainStart(seq, h, mac)
    return chain, ChainStart()


def _peek_record(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return jsontext.loads(text)
    except JsonTextError:
        return None


@contextlib.contextmanager
def _no_collector() -> Iterator[None]:
    """The cyclic garbage collector off while a log is verified: its records (orjson's
    dicts, lists and strings) hold no cycles, and the collections a million of them set off
    only walk the process's heap — 5 % of a verification in a process that has done other
    work (``make bench``: after a check and a replay; 29 Nov 2026). Put back as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _verify(
    items: Iterable[tuple[str | bytes | None, str | None]],
    source: str,
    start: ChainStart | None,
    key: bytes | None,
    want_hashes: Collection[int],
    *,
    chain: Mapping[str, Any] | bool | None = False,
) -> VerifyResult:
    with _no_collector():
        return _verify_items(items, source, start, key, want_hashes, chain=chain)


def _verify_items(
    items: Iterable[tuple[str | bytes | None, str | None]],
    source: str,
    start: ChainStart | None,
    key: bytes | None,
    want_hashes: Collection[int],
    *,
    chain: Mapping[str, Any] | bool | None = False,
) -> VerifyResult:
    """``chain``: the file's first record's ``chain`` field when ``items`` start later in
    the file (:func:`verify_tail`); False: read it from the first item."""
    it = iter(items)
    current = next(it, None)
    if chain is False:
        chain = None
        if current is not None:
            chain, auto = chain_start_of(_peek_record(current[0]))
            if start is None:
                start = auto
    start = start or ChainStart()
    first_chain: Mapping[str, Any] | None = chain if isinstance(chain, Mapping) else None
    keyed = bool(first_chain and isinstance(first_chain.get("mac"), Mapping))
    want = set(want_hashes)
    hashes: dict[int, str] = {}
    state = ChainState(start.seq, start.hash, start.mac, keyed=keyed, key=key)
    good = 0
    lineno = 0
    back: deque[tuple[str | bytes | None, str | None]] = deque()  # lines to look at again
    slow = 0  # lines still to check one by one (a run that did not pass as a whole)
    while current is not None:
        if slow == 0:
            if not back and isinstance(it, RawLines):  # a file: its lines as read
                lines = [cast(bytes, current[0]), *it.run()]
                if state.block(lines, want, hashes):
                    good += len(lines)
                    lineno += len(lines)
                    current = next(it, None)
                    continue
                back.extend(zip(lines[1:], itertools.repeat(None)))
                slow = len(lines)
            else:
                run = [current]
                while back and len(run) < BLOCK_LINES:
                    run.append(back.popleft())
                run.extend(itertools.islice(it, BLOCK_LINES - len(run)))
                raws: list[Any] = list(map(_RAW, run))
                if set(map(type, raws)) == {bytes} and state.block(raws, want, hashes):
                    good += len(run)
                    lineno += len(run)
                    current = back.popleft() if back else next(it, None)
                    continue
                back.extendleft(reversed(run[1:]))
                slow = len(run)
        slow -= 1
        following = back.popleft() if back else next(it, None)
        lineno += 1
        text, decode_error = current
        try:
            state.check(text, decode_error, is_last=following is None, first=good == 0,
                        lineno=lineno)
        except BadLine as bad:
            detail, problem = bad.detail, bad.problem
            if problem == "gap":
                rest = itertools.chain(back, it)
                problem, detail, total = _diagnose_gap(state, lineno, following, rest)
            else:
                rest = itertools.chain(back, it)
                total = lineno + (0 if following is None else 1 + sum(1 for _ in rest))
            return VerifyResult(
                False, good, bad.seq, lineno, bad.reason, source, state.last_hash,
                state.last_seq, start, first_chain, problem, detail, state.macs,
                key is not None, state.last_mac, total, hashes)
        good += 1
        if state.last_seq in want:
            hashes[state.last_seq] = state.last_hash
        current = following
    return VerifyResult(True, good, None, None, None, source, state.last_hash, state.last_seq,
                        start, first_chain, None, None, state.macs, key is not None, state.last_mac,
                        lineno, hashes)


def _diagnose_gap(
    state: ChainState, lineno: int, following: Any,
    it: Iterator[tuple[str | bytes | None, str | None]]
) -> tuple[str, str, int]:
    """A seq gap at ``lineno``: moved (the missing seq is further on) or deleted?

    Returns the problem, the diagnosis and the number of lines in the file.
    """
    expected = state.last_seq + 1
    n = lineno
    item = following
    while item is not None:
        n += 1
        record = _peek_record(item[0])
        if isinstance(record, dict) and record.get("seq") == expected:
            found = n
            n += sum(1 for _ in it)
            return REORDERED, (f"records out of order: seq {expected} is further on, at line "
                               f"{found}"), n
        item = next(it, None)
    return DELETED, f"seq {expected} is nowhere in the file: record(s) deleted", n


def verify_run(
    lines: Iterable[bytes],
    *,
    start: ChainStart | None,
    chain: Mapping[str, Any] | bool | None = False,
    key: bytes | None = None,
    source: str = "<log>",
) -> VerifyResult:
    """Verify raw lines (each with its ``\\n``) that continue a file already checked up to
    ``start`` — a follower's next run of a growing log (the floor, ``floor/``), checked as
    :func:`verify_file` checks them. ``chain`` is the file's first record's ``chain`` field
    (keyed or not), or False when ``lines`` begin the file (then it is read from the first
    line, and ``start`` None means: where that line says the file starts)."""
    return _verify(((raw, None) for raw in lines), source, start, key, (), chain=chain)
