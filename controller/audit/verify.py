"""Verify a hash-chained audit log file (sets of files, anchors: :mod:`controller.audit.sets`).

The checks, in order, for each line (1-based):

1. it ends with ``\\n`` (a last line without one is a *torn* write);
2. it is UTF-8 and parses as a JSON object with no floats;
3. it has ``seq`` (int), ``ts``, ``kind``, ``prev`` and ``hash`` (str);
4. the line is byte-for-byte the canonical encoding of the record (no
   re-formatting, no duplicate keys);
5. ``hash`` equals the SHA-256 of the canonical encoding of the record
   without ``hash`` (otherwise the record was edited);
6. ``mac``: a keyed file (its first record's ``chain.mac``) has a ``mac`` on
   every record, an unkeyed one on none; with the key, each ``mac`` is the
   HMAC-SHA-256 of the previous ``mac`` and the record without ``hash``/``mac``;
7. ``seq`` is the previous record's ``seq`` + 1;
8. ``prev`` equals the previous record's ``hash``.

The chain starts at seq 1 and ``GENESIS``, unless the file's first record
says (``chain.continues``) that it continues another file of a rotated set:
then it starts where that file ended. Verification stops at the first bad
line; the result names it, gives the reason, and classifies the tampering
(``problem``) with a diagnosis (``detail``), looking ahead where that helps
(a record that is missing here but found further on was *moved*, not deleted).
See docs/audit-log.md.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import itertools
import json
import operator
import os
import re
import threading
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import orjson

from controller import jsontext
from controller.audit.canonical import GENESIS, canonical_text, key_id
from controller.audit.records import Meter
from controller.jsontext import JsonTextError

_STR_FIELDS = ("ts", "kind", "prev", "hash")
_HEX64 = re.compile(r"[0-9a-f]{64}")
# The fast paths' float screen, with no pass of its own. Every float orjson reads holds a
# ``.``, an ``E`` or an ``e``; orjson writes one back with a ``.`` or an exponent sign
# (``1e+16``, ``2e-7``). ``_MARKED`` turns ``.``, ``E``, ``+`` and ``-`` into ``?``, which
# no JSON number may hold but any string may, before decoding: a float with a fraction,
# an ``E`` or a signed exponent then fails to decode, and one written ``1e16`` decodes but
# does not encode back to the same bytes — either way the exact path takes the line and
# names the float. (So does a negative integer, which our records never hold.) Marking
# changes no string's escaping; it can change the order of keys that hold those
# characters, which ours never do: such a line goes to the exact path too.
_MARKED = bytes.maketrans(b".E+-", b"????")
#: the same, for a run of lines made one JSON array: a raw newline (never inside a JSON
#: string, where it is escaped) becomes the comma between two records
_MARKED_RUN = bytes.maketrans(b".E+-\n", b"????,")
_SORTED = orjson.OPT_SORT_KEYS
_HASH, _KIND, _PREV, _SEQ, _TS = map(operator.itemgetter, ("hash", "kind", "prev", "seq", "ts"))
_RAW = operator.itemgetter(0)
_HEXDIGEST = operator.methodcaller("hexdigest")
#: lines checked as one run by :meth:`_State.block`
BLOCK_LINES = 128

# Classification of the first bad line (VerifyResult.problem).
EDITED = "edited"  # a record's content changed (hash mismatch, not canonical, unparseable)
REHASHED = "rehashed"  # a record changed and its hash recomputed (next prev breaks)
DELETED = "deleted"  # records missing (seq gap, none of them further on)
INSERTED = "inserted"  # an extra record (repeated seq / chain skips over it)
REORDERED = "reordered"  # records out of order (the missing seq is further on)
TORN = "torn"  # the last line was cut by an interrupted write
START = "start"  # the file does not start where its chain says it should
MAC = "mac"  # keyed log: a MAC is wrong or missing (rewritten or forged without the key)
WRONG_KEY = "wrong-key"  # keyed log verified with another key: nothing could be checked


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


class _FloatInRecord(ValueError):
    pass


def _no_float(text: str) -> Any:
    raise _FloatInRecord(text)


_DECODER = json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)


def _without_member(body: str, key: str, value: str) -> str | None:
    """``body`` (a canonical line, no ``\\n``) without its top-level ``"key":"value"`` member.

    The canonical encoding of a record minus one key is the canonical line
    minus that member and one comma, so the hash (and MAC) can be checked on
    the line itself without encoding the record again. The member is found by
    its exact text: a nested copy with the same value would have to contain a
    hash of itself, and a quote inside a string is always escaped.
    """
    member = f'"{key}":"{value}"'
    i = body.find(member)
    if i < 0:
        return None
    j = i + len(member)
    if body[j] == ",":
        return body[:i] + body[j + 1:]
    if body[i - 1] == ",":  # the last member
        return body[:i - 1] + body[j:]
    return body[:i] + body[j:]  # the only member


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
        return _verify(_RawLines(f, limit=end, meter=meter), os.fspath(path), start, key,
                       want_hashes)


#: a log larger than this is verified on every core (about 50,000 records)
PARALLEL_BYTES = 16 << 20


def _segment(name: str, key: bytes | None, want: Collection[int], begin: int, end: int,
             start: ChainStart | None, chain: Mapping[str, Any] | bool | None
             ) -> VerifyResult:
    """Verify bytes ``begin``..``end`` of ``name`` (whole lines), from ``start``."""
    with open(name, "rb") as f:
        f.seek(begin)
        return _verify(_RawLines(f, limit=end - begin), name, start, key, want, chain=chain)


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
        chain, _ = _chain_start_of(first)
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
        chain, _ = _chain_start_of(first)
        if not isinstance(first, dict) or (
                key is not None and _declared_key_id(first) not in (None, key_id(key))):
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
        result = _verify(_RawLines(f, limit=size - begin), name, start, key, (), chain=chain)
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


class _RawLines:
    """A file's raw lines as ``(raw, None)`` items (:meth:`_State.check` takes bytes, and
    decodes them itself only when it must: :func:`_text_of`), read about
    :data:`RUN_BYTES` at a time by ``readlines``; :meth:`run` hands the rest of what was
    read to :meth:`_State.block` as it is: one call per run, not a generator step per
    line. ``limit``: read only that many bytes (a line that
    crosses it is cut there); ``meter``: told the bytes read."""

    def __init__(self, f: io.BufferedReader, *, limit: int | None = None,
                 meter: Meter | None = None) -> None:
        self._f = f
        self._left = limit
        self._meter = meter
        self._lines: list[bytes] = []
        self._next = 0

    def _fill(self) -> bool:
        if self._left is not None and self._left <= 0:
            return False
        lines = self._f.readlines(RUN_BYTES)
        if not lines:
            return False
        size = sum(map(len, lines)) if self._left is not None or self._meter else 0
        if self._left is not None:
            if size > self._left:
                kept, left = [], self._left
                for raw in lines:
                    if left <= 0:
                        break
                    kept.append(raw[:left])
                    left -= len(raw)
                lines, size = kept, self._left
            self._left -= size
        if self._meter is not None:
            self._meter("verifying", size)
        self._lines, self._next = lines, 0
        return True

    def __iter__(self) -> _RawLines:
        return self

    def __next__(self) -> tuple[bytes, None]:
        if self._next >= len(self._lines) and not self._fill():
            raise StopIteration
        raw = self._lines[self._next]
        self._next += 1
        return raw, None

    def run(self) -> list[bytes]:
        """The lines read and not yet handed out (reading more when there are none)."""
        if self._next >= len(self._lines) and not self._fill():
            return []
        lines = self._lines[self._next:] if self._next else self._lines
        self._next = len(self._lines)
        return lines


#: what :class:`_RawLines` reads at a time (about 128 records of a card log)
RUN_BYTES = 48 << 10


def _text_of(raw: bytes) -> tuple[str | None, str | None]:
    """A raw line as text, or why it is not text (the slow path's input)."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        if not raw.endswith(b"\n"):  # cut inside a character: report it as torn
            return raw.decode("utf-8", "replace"), None
        return None, f"line is not valid UTF-8 ({exc.reason} at byte {exc.start})"


def _without_member_b(body: bytes, member: bytes) -> bytes | None:
    """:func:`_without_member` on bytes, for the fast path (``member`` is the whole
    ``"key":"value"`` text)."""
    i = body.find(member)
    if i < 0:
        return None
    j = i + len(member)
    if body[j:j + 1] == b",":
        return body[:i] + body[j + 1:]
    if body[i - 1:i] == b",":
        return body[:i - 1] + body[j:]
    return body[:i] + body[j:]


class _BadLine(Exception):
    def __init__(self, seq: int | None, reason: str, problem: str, detail: str | None = None):
        super().__init__(reason)
        self.seq = seq
        self.reason = reason
        self.problem = problem
        self.detail = detail


def _chain_start_of(record: Any) -> tuple[Mapping[str, Any] | None, ChainStart]:
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


def _verify(
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
            chain, auto = _chain_start_of(_peek_record(current[0]))
            if start is None:
                start = auto
    start = start or ChainStart()
    first_chain: Mapping[str, Any] | None = chain if isinstance(chain, Mapping) else None
    keyed = bool(first_chain and isinstance(first_chain.get("mac"), Mapping))
    want = set(want_hashes)
    hashes: dict[int, str] = {}
    state = _State(start.seq, start.hash, start.mac, keyed=keyed, key=key)
    good = 0
    lineno = 0
    back: deque[tuple[str | bytes | None, str | None]] = deque()  # lines to look at again
    slow = 0  # lines still to check one by one (a run that did not pass as a whole)
    while current is not None:
        if slow == 0:
            if not back and isinstance(it, _RawLines):  # a file: its lines as read
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
        except _BadLine as bad:
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
    state: _State, lineno: int, following: Any,
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


class _State:
    """The running chain: last seq, hash and mac, and the hash before the last (diagnosis)."""

    def __init__(self, seq: int, hash_: str, mac: str, *, keyed: bool, key: bytes | None):
        self.last_seq = seq
        self.last_hash = hash_
        self.before_last_hash: str | None = None
        self.last_mac = mac
        self.keyed = keyed
        self.key = key
        self.macs = 0

    def block(self, raws: list[bytes], want: Collection[int], hashes: dict[int, str]) -> bool:
        """Check a run of raw lines at once, or change nothing and return False (then they
        are checked one by one, and any fault is named there).

        Everything a line's record must be is checked on the whole run by two C calls: the
        run as one JSON array decodes (marked: :data:`_MARKED`, so no float does) and
        encodes back to the same bytes (canonical). Then each line in turn: its fields'
        types, its hash on its raw bytes, its MAC, its link."""
        if not raws[-1].endswith(b"\n"):
            return False
        # each line's newline now a comma, the last one the array's end; a bytearray's
        # translate takes a third less time than a bytes' here, and the join is the one copy
        marked = bytearray().join([b"[", *raws]).translate(_MARKED_RUN)
        marked[-1] = 93  # "]"
        try:
            records = orjson.loads(marked)
        except orjson.JSONDecodeError:
            return False
        try:
            canonical = orjson.dumps(records, option=_SORTED)
        except orjson.JSONEncodeError:  # nested deeper than orjson writes: one by one
            return False
        if len(records) != len(raws) or canonical != marked:
            return False
        if not self.keyed and self.key is None:
            return self._plain_run(raws, records, want, hashes)
        saved = (self.last_seq, self.last_hash, self.before_last_hash, self.last_mac,
                 self.macs)
        seq, last, before, mac_head = self.last_seq, self.last_hash, self.before_last_hash, \
            self.last_mac
        macs = 0
        keyed, key = self.keyed, self.key
        sha256 = hashlib.sha256
        found: list[tuple[int, str]] = []
        for raw, record in zip(raws, records, strict=True):
            if type(record) is not dict:
                break
            digest = record.get("hash")
            mac = record.get("mac")
            number = record.get("seq")
            if (type(number) is not int or number != seq + 1 or type(digest) is not str
                    or record.get("prev") != last or type(record.get("ts")) is not str
                    or type(record.get("kind")) is not str):
                break
            member = b'"hash":"' + digest.encode() + b'"'
            i = raw.find(member)  # the line without it: as _without_member_b, inlined
            if i < 0:
                break
            j = i + len(member)
            unhashed = (raw[:i] + raw[j + 1:-1] if raw[j] == 44  # ","
                        else raw[:i - 1] + raw[j:-1] if raw[i - 1] == 44 else raw[:i] + raw[j:-1])
            if sha256(unhashed).hexdigest() != digest:
                break
            if mac is None:
                if keyed or key is not None:
                    break
            else:
                if type(mac) is not str or not keyed or not _HEX64.fullmatch(mac):
                    break
                if key is not None:
                    signed = _without_member_b(unhashed, b'"mac":"' + mac.encode() + b'"')
                    if signed is None or not hmac.compare_digest(hmac.digest(
                            key, mac_head.encode("ascii") + signed, "sha256").hex(), mac):
                        break
                macs += 1
                mac_head = mac
            seq += 1
            before, last = last, digest
            if seq in want:
                found.append((seq, digest))
        else:
            self.last_seq, self.last_hash, self.before_last_hash = seq, last, before
            self.last_mac, self.macs = mac_head, self.macs + macs
            hashes.update(found)
            return True
        (self.last_seq, self.last_hash, self.before_last_hash, self.last_mac,
         self.macs) = saved
        return False

    def _plain_run(self, raws: list[bytes], records: list[Any], want: Collection[int],
                   hashes: dict[int, str]) -> bool:
        """:meth:`block` for a log without MACs, each check done on the whole run by C-level
        maps; only the hash is computed in a loop per record. The same checks: every record
        a dict with an int ``seq`` one above the last, str ``hash``/``prev``/``ts``/``kind``,
        ``prev`` the previous hash, no ``mac``, and the hash the SHA-256 of the raw line
        without its ``"hash":…`` member. A run this does
        not accept changes nothing (the caller checks it line by line and names the fault).

        The member removed is the line's first ``"hash":"<64 hex>"``: a nested one that
        comes first leaves the record's own hash in the bytes hashed, so the digest cannot
        match and the run goes to the line-by-line path, which finds the right one."""
        n = len(records)
        try:  # not a dict (TypeError) or a field missing (KeyError): line by line
            for record in records:  # a plain loop: faster here than any(map(...)) by half
                if "mac" in record:  # no MAC in this log: any is for the exact checks
                    return False
            digests = list(map(_HASH, records))
            prevs = list(map(_PREV, records))
            seqs = list(map(_SEQ, records))
            kinds = set(map(type, map(_KIND, records)))
            stamps = set(map(type, map(_TS, records)))
        except (KeyError, TypeError):
            return False
        first = self.last_seq + 1
        # (a hash that is not a str fails its comparison with a hexdigest below, and a prev
        # must equal the hash before it)
        if (seqs != list(range(first, first + n)) or set(map(type, seqs)) != {int}
                or kinds != {str} or stamps != {str}
                or prevs[0] != self.last_hash or prevs[1:] != digests[:-1]):
            return False
        sha256 = hashlib.sha256
        for raw, digest in zip(raws, digests, strict=True):
            i = raw.find(b'"hash":"')  # "hash":"<64 hex>", is 74 bytes; no final newline
            if sha256(raw[:i] + raw[i + 74:-1]).hexdigest() != digest:
                return False
        for seq in want:
            if first <= seq < first + n:
                hashes[seq] = digests[seq - first]
        self.before_last_hash = digests[-2] if n > 1 else self.last_hash
        self.last_seq, self.last_hash = seqs[-1], digests[-1]
        return True

    def check(self, line: str | bytes | None, decode_error: str | None, *, is_last: bool,
              first: bool, lineno: int) -> None:
        """Check one line, or raise :class:`_BadLine`. A raw line that is a sound record goes
        through :meth:`_fast`: orjson decodes it, and its hash and MAC are checked on the
        raw bytes. Anything the fast path does not accept as sound — whatever it is — is
        judged again by the exact checks below, which name the problem."""
        if isinstance(line, bytes):
            if self._fast(line, is_last=is_last, first=first, lineno=lineno):
                return
            line, decode_error = _text_of(line)
        self._exact(line, decode_error, is_last=is_last, first=first, lineno=lineno)

    def _fast(self, raw: bytes, *, is_last: bool, first: bool, lineno: int) -> bool:
        if not raw.endswith(b"\n"):
            return False
        body = raw[:-1]
        marked = body.translate(_MARKED)
        try:
            record = orjson.loads(marked)
        except orjson.JSONDecodeError:  # not JSON, or a float with a '.' or an 'E'
            return False
        if type(record) is not dict:
            return False
        seq = record.get("seq")
        digest = record.get("hash")
        prev = record.get("prev")
        mac = record.get("mac")
        if (type(seq) is not int or type(digest) is not str or type(prev) is not str
                or type(record.get("ts")) is not str or type(record.get("kind")) is not str):
            return False  # _STR_FIELDS, spelt out (this is per record)
        try:
            if orjson.dumps(record, option=orjson.OPT_SORT_KEYS) != marked:
                return False  # not canonical
        except orjson.JSONEncodeError:  # nested deeper than orjson writes: the slow path
            return False
        unhashed = _without_member_b(body, b'"hash":"' + digest.encode() + b'"')
        if unhashed is None or hashlib.sha256(unhashed).hexdigest() != digest:
            return False
        if mac is None:
            if self.keyed or self.key is not None:
                return False
        else:
            if type(mac) is not str or not _HEX64.fullmatch(mac) or not self.keyed:
                return False
            if self.key is not None:
                signed = _without_member_b(unhashed, b'"mac":"' + mac.encode() + b'"')
                if signed is None or not hmac.compare_digest(hmac.digest(
                        self.key, self.last_mac.encode("ascii") + signed, "sha256").hex(),
                        mac):
                    return False
        self._check_link(record, seq, first=first, lineno=lineno)  # raises as the exact path
        if mac is not None:
            self.macs += 1
            self.last_mac = mac
        self.before_last_hash = self.last_hash
        self.last_seq, self.last_hash = seq, digest
        return True

    def _exact(self, text: str | None, decode_error: str | None, *, is_last: bool,
               first: bool, lineno: int) -> None:
        if decode_error is not None or text is None:
            raise _BadLine(None, decode_error or "unreadable line", EDITED)
        terminated = text.endswith("\n")
        body = text[:-1] if terminated else text

        record: Any = None
        float_error: str | None = None
        parse_error: str | None = None
        try:
            record = _DECODER.decode(body)
        except _FloatInRecord as exc:
            float_error = f"record contains a float ({exc}); records never contain floats"
        except RecursionError:
            parse_error = "does not parse as JSON (nested too deep to read)"
        except ValueError as exc:
            parse_error = f"does not parse as JSON ({exc})"
        claimed = record.get("seq") if isinstance(record, dict) else None
        seq = claimed if type(claimed) is int else None

        if not terminated:
            if is_last:
                raise _BadLine(
                    seq, "torn last line: no newline terminator (the write was interrupted)",
                    TORN, "recover() cuts it back to the last whole record")
            raise _BadLine(seq, "line has no newline terminator", EDITED)
        if parse_error is not None:
            if is_last:
                raise _BadLine(None, f"torn last line: {parse_error}", TORN)
            raise _BadLine(None, f"line {parse_error}", EDITED)
        if float_error is not None:
            raise _BadLine(None, float_error, EDITED)
        if not isinstance(record, dict):
            raise _BadLine(None, f"line is not a JSON object (got {type(record).__name__})",
                           EDITED)
        if seq is None:
            raise _BadLine(None, f"missing or ill-typed field 'seq' (got {claimed!r})", EDITED)
        for k in _STR_FIELDS:
            if not isinstance(record.get(k), str):
                raise _BadLine(seq, f"missing or ill-typed field {k!r} (got {record.get(k)!r})",
                               EDITED)

        if canonical_text(record) != body:
            raise _BadLine(seq, "line is not in canonical form (re-encoded, or duplicate keys)",
                           EDITED)

        unhashed = _without_member(body, "hash", record["hash"])
        if unhashed is None or \
                hashlib.sha256(unhashed.encode("utf-8")).hexdigest() != record["hash"]:
            raise _BadLine(seq, "hash mismatch: record was edited", EDITED)

        self._check_mac(record, unhashed, seq, first=first, is_last=is_last)
        self._check_link(record, seq, first=first, lineno=lineno)

        self.before_last_hash = self.last_hash
        self.last_seq, self.last_hash = seq, record["hash"]

    def _check_mac(self, record: dict[str, Any], unhashed: str, seq: int, *, first: bool,
                   is_last: bool) -> None:
        mac = record.get("mac")
        if mac is None:
            if self.keyed or self.key is not None:
                why = ("the file is keyed (its first record declares a MAC chain)" if self.keyed
                       else "a key was given, so every record must carry one")
                raise _BadLine(seq, f"record has no mac: {why}", MAC,
                               "mac removed, or record written by someone without the key")
            return
        if not isinstance(mac, str) or not _HEX64.fullmatch(mac):
            raise _BadLine(seq, f"ill-typed field 'mac' (got {mac!r})", EDITED)
        if not self.keyed:
            raise _BadLine(seq, "record has a mac but the file's first record declares no "
                           "MAC chain", MAC, "first record replaced, or record from another log")
        if self.key is not None:
            body = _without_member(unhashed, "mac", mac)
            message = self.last_mac.encode("ascii") + (body or "").encode("utf-8")
            expected = hmac.digest(self.key, message, "sha256").hex()
            if body is None or not hmac.compare_digest(expected, mac):
                if first:
                    declared = _declared_key_id(record)
                    if declared is not None and declared != key_id(self.key):
                        raise _BadLine(
                            seq, f"wrong key: the log's MACs were made with key {declared}, "
                            f"the key given is {key_id(self.key)}: the log was re-signed by "
                            "someone else (or the key given is not this table's)", WRONG_KEY,
                            "re-keyed: every record rewritten under another key")
                detail = ("forged record appended by someone without the key (or the last "
                          "record rewritten)" if is_last else
                          "record rewritten with its hash recomputed, or forged, by someone "
                          "without the key")
                raise _BadLine(seq, "mac mismatch: the record is not what the key holder wrote",
                               MAC, detail)
        self.macs += 1
        self.last_mac = mac

    def _check_link(self, record: dict[str, Any], seq: int, *, first: bool, lineno: int) -> None:
        expected = self.last_seq + 1
        if seq != expected:
            if first:
                what = ("record(s) missing at the start" if seq > expected
                        else "bad sequence number")
                raise _BadLine(seq, f"first record has seq {seq}, expected {expected}: {what}",
                               START, "the start of the file was cut off or replaced")
            if seq > expected:
                raise _BadLine(seq, f"seq {seq} follows seq {self.last_seq}: record(s) missing "
                               "(deleted or moved)", "gap")
            if seq == self.last_seq and record["prev"] == self.before_last_hash:
                detail = (f"a record was inserted at line {lineno - 1}: this record chains to "
                          f"the one before it")
                problem = INSERTED
            elif seq == self.last_seq:
                detail, problem = f"seq {seq} appears twice (line {lineno - 1} and here)", INSERTED
            else:
                detail, problem = f"seq {seq} came earlier in the file", REORDERED
            raise _BadLine(seq, f"seq {seq} follows seq {self.last_seq}: record repeated or "
                           "out of order", problem, detail)
        if record["prev"] != self.last_hash:
            if first:
                start = "GENESIS (64 zeros)" if self.last_hash == GENESIS else self.last_hash
                raise _BadLine(
                    seq, f"prev of the first record does not match the chain start {start}: "
                    "the log does not start where it should", START)
            raise _BadLine(
                seq, "prev does not match the previous record's hash: a record was deleted, "
                "inserted or reordered before this one", REHASHED,
                f"the record at line {lineno - 1} was replaced, or edited and its hash "
                "recomputed")


def _declared_key_id(record: Mapping[str, Any]) -> str | None:
    chain = record.get("chain")
    if isinstance(chain, Mapping) and isinstance(chain.get("mac"), Mapping):
        kid = chain["mac"].get("key_id")
        return kid if isinstance(kid, str) else None
    return None


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
