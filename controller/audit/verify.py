"""Verify a hash-chained audit log (one file; rotated sets, HMAC and anchors come later).

The checks, in order, for each line (1-based):

1. it ends with ``\\n`` (a last line without one is a *torn* write);
2. it is UTF-8 and parses as a JSON object with no floats;
3. it has ``seq`` (int), ``ts``, ``kind``, ``prev`` and ``hash`` (str);
4. the line is byte-for-byte the canonical encoding of the record (no
   re-formatting, no duplicate keys);
5. ``hash`` equals the SHA-256 of the canonical encoding of the record
   without ``hash`` (otherwise the record was edited);
6. ``seq`` is the previous record's ``seq`` + 1, starting at 1;
7. ``prev`` equals the previous record's ``hash`` (``GENESIS`` for the first).

Verification stops at the first bad line. See docs/audit-log.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from controller.audit.canonical import GENESIS, canonical_bytes, record_hash

_STR_FIELDS = ("ts", "kind", "prev", "hash")


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of a verification.

    ``records`` counts the records that verified before the first bad one (all
    of them when ``ok``); ``first_bad_line`` is 1-based; ``first_bad_seq`` is the
    ``seq`` the bad record claims (None when it cannot be read); ``head`` is the
    hash of the last good record (``GENESIS`` if none).
    """

    ok: bool
    records: int
    first_bad_seq: int | None
    first_bad_line: int | None
    reason: str | None
    source: str = "<log>"
    head: str = GENESIS

    def __str__(self) -> str:
        if self.ok:
            return f"{self.source}: ok, {self.records} records, head {self.head}"
        seq = "" if self.first_bad_seq is None else f" (seq {self.first_bad_seq})"
        return f"{self.source}: line {self.first_bad_line}{seq}: {self.reason}"


class _FloatInRecord(ValueError):
    pass


def _no_float(text: str) -> Any:
    raise _FloatInRecord(text)


def verify_lines(
    lines: Iterable[str],
    *,
    source: str = "<log>",
    first_seq: int = 1,
    first_prev: str = GENESIS,
) -> VerifyResult:
    """Verify the lines of a log, each *with* its ``\\n`` terminator (as iterating a file gives).

    ``first_seq`` and ``first_prev`` are what the first record must carry
    (1 and ``GENESIS`` for a log that starts a chain).
    """
    return _verify(((line, None) for line in lines), source, first_seq, first_prev)


def verify_file(path: str | os.PathLike[str]) -> VerifyResult:
    """Verify the log file at ``path`` (read as bytes, decoded line by line as UTF-8)."""
    with open(path, "rb") as f:

        def decoded() -> Iterator[tuple[str | None, str | None]]:
            for raw in f:
                try:
                    yield raw.decode("utf-8"), None
                except UnicodeDecodeError as exc:
                    if not raw.endswith(b"\n"):  # cut inside a character: report it as torn
                        yield raw.decode("utf-8", "replace"), None
                    else:
                        yield None, f"line is not valid UTF-8 ({exc.reason} at byte {exc.start})"

        return _verify(decoded(), os.fspath(path), 1, GENESIS)


def _verify(
    items: Iterable[tuple[str | None, str | None]],
    source: str,
    first_seq: int,
    first_prev: str,
) -> VerifyResult:
    last_seq, last_hash = first_seq - 1, first_prev
    good = 0
    it = iter(items)
    current = next(it, None)
    lineno = 0
    while current is not None:
        following = next(it, None)
        lineno += 1
        text, decode_error = current
        try:
            last_seq, last_hash = _check_line(
                text,
                decode_error,
                is_last=following is None,
                first=good == 0,
                last_seq=last_seq,
                last_hash=last_hash,
            )
        except _BadLine as bad:
            return VerifyResult(False, good, bad.seq, lineno, bad.reason, source, last_hash)
        good += 1
        current = following
    return VerifyResult(True, good, None, None, None, source, last_hash)


class _BadLine(Exception):
    def __init__(self, seq: int | None, reason: str) -> None:
        super().__init__(reason)
        self.seq = seq
        self.reason = reason


def _check_line(
    text: str | None,
    decode_error: str | None,
    *,
    is_last: bool,
    first: bool,
    last_seq: int,
    last_hash: str,
) -> tuple[int, str]:
    """(seq, hash) of a good line; raises :class:`_BadLine` with the claimed seq and reason."""
    if decode_error is not None or text is None:
        raise _BadLine(None, decode_error or "unreadable line")
    terminated = text.endswith("\n")
    body = text[:-1] if terminated else text

    record: Any = None
    float_error: str | None = None
    parse_error: str | None = None
    try:
        record = json.loads(body, parse_float=_no_float, parse_constant=_no_float)
    except _FloatInRecord as exc:
        float_error = f"record contains a float ({exc}); records never contain floats"
    except (ValueError, RecursionError) as exc:
        parse_error = f"does not parse as JSON ({exc})"
    claimed = record.get("seq") if isinstance(record, dict) else None
    seq = claimed if type(claimed) is int else None

    if not terminated:
        if is_last:
            raise _BadLine(seq, "torn last line: no newline terminator (the write was interrupted)")
        raise _BadLine(seq, "line has no newline terminator")
    if parse_error is not None:
        raise _BadLine(None, f"torn last line: {parse_error}" if is_last else f"line {parse_error}")
    if float_error is not None:
        raise _BadLine(None, float_error)
    if not isinstance(record, dict):
        raise _BadLine(None, f"line is not a JSON object (got {type(record).__name__})")
    if seq is None:
        raise _BadLine(None, f"missing or ill-typed field 'seq' (got {claimed!r})")
    for key in _STR_FIELDS:
        if not isinstance(record.get(key), str):
            raise _BadLine(seq, f"missing or ill-typed field {key!r} (got {record.get(key)!r})")

    if canonical_bytes(record).decode("utf-8") != body:
        raise _BadLine(seq, "line is not in canonical form (re-encoded, or duplicate keys)")

    body_record = {k: v for k, v in record.items() if k != "hash"}
    if record_hash(body_record) != record["hash"]:
        raise _BadLine(seq, "hash mismatch: record was edited")

    expected = last_seq + 1
    if seq != expected:
        if first:
            what = "record(s) missing at the start" if seq > expected else "bad sequence number"
            raise _BadLine(seq, f"first record has seq {seq}, expected {expected}: {what}")
        if seq > expected:
            what = "record(s) missing (deleted or moved)"
        else:
            what = "record repeated or out of order"
        raise _BadLine(seq, f"seq {seq} follows seq {last_seq}: {what}")

    if record["prev"] != last_hash:
        if first:
            start = "GENESIS (64 zeros)" if last_hash == GENESIS else last_hash
            raise _BadLine(
                seq,
                f"prev of the first record does not match the chain start {start}: "
                "the log does not start where it should",
            )
        raise _BadLine(
            seq,
            "prev does not match the previous record's hash: "
            "a record was deleted, inserted or reordered before this one",
        )

    return seq, record["hash"]
