"""Opening an existing log for appending: its head, its torn tail, and the checks before.

A writer continues a chain only from a last record that is whole and whose hash holds,
and (with ``verify``) from a tail that verifies (:func:`~controller.audit.verify.verify_tail`:
the last window of the file, so reopening takes bounded time whatever the log's length —
the whole chain is ``audit verify``'s job). A torn last line is cut only by crash recovery,
and only after the whole records before it verify; the cut is described (:class:`TornCut`)
so the recovery record keeps the evidence.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import jsontext
from controller.audit.anchors import Anchor
from controller.audit.canonical import GENESIS, record_hash
from controller.audit.errors import AuditLogError
from controller.audit.verify import VerifyResult, verify_tail
from controller.jsontext import JsonTextError


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


def read_head(fd: int, path: str, end: int | None = None) -> tuple[int, str]:
    """The (seq, hash) of the last record of an open log file; (0, GENESIS) if it is empty.

    Refuses (AuditLogError with path and line) a torn or unparseable last line,
    or one whose hash does not match its content: appending would extend a
    broken chain. Recovery is a separate, explicit step. ``end``: read the file as if it
    ended there (the end of its last whole line, before a torn one).
    """
    size = os.fstat(fd).st_size if end is None else end
    if size == 0:
        return 0, GENESIS
    if os.pread(fd, 1, size - 1) != b"\n":
        raise AuditLogError(
            "torn last line (no newline terminator): the previous writer was interrupted; "
            "recover the log before appending",
            path=path,
            line=count_newlines(fd, size) + 1,
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
            line=count_newlines(fd, size),
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


def count_newlines(fd: int, size: int) -> int:
    count, offset = 0, 0
    while offset < size:
        block = os.pread(fd, min(1 << 20, size - offset), offset)
        if not block:
            break
        count += block.count(b"\n")
        offset += len(block)
    return count


def check_verified(result: VerifyResult, name: str, key: bytes | None, *,
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


def open_existing(name: str, seq: int, prev: str, *, key: bytes | None, verify: bool) -> str:
    """Check a non-empty log before appending; return its last ``mac`` (``GENESIS`` if none)."""
    if not verify:
        if key is not None:
            raise AuditLogError("a keyed log must be verified before it is continued", path=name)
        return GENESIS
    result = verify_tail(name, key=key)  # bounded: the whole chain is audit verify's job
    mac = check_verified(result, name, key)
    if (result.head_seq, result.head) != (seq, prev):  # pragma: no cover - changed under the lock
        raise AuditLogError("the file changed while it was being verified", path=name)
    return mac


def check_anchored(fd: int, name: str, anchored: Sequence[Anchor]) -> None:
    """Refuse (:class:`AuditLogError`, before anything is cut or written) to continue a log
    that its own anchors (``anchored``: those naming this file, in anchor-file order) show
    was cut or added to since its writer last anchored it:

    - an anchor records a seq past the file's last whole record: records were cut off (or,
      under durability ``none``, lost to a power cut);
    - the last whole record is not the one an anchor of its seq recorded: rewritten;
    - the writer's last anchor of the file is ``close``, and records or a torn line follow
      it: a writer that reopens a file anchors ``open`` first, so they are someone else's.

    ``audit verify --anchors`` names the same damage (:mod:`controller.audit.sets`); here it
    keeps a restart or ``audit recover`` from cutting a torn line off such a tail and
    anchoring the result as the truth (a review: a forged record appended after ``close``,
    then half a line, was "recovered" and then verified clean)."""
    if not anchored:
        return
    found = find_torn_tail(fd)
    torn = found is not None
    end = found[0] if found is not None else os.fstat(fd).st_size
    if end == 0:  # no whole record: a new file's start, which its 'open' anchor names —
        # unless an anchor shows records were written (any but 'open', or opens at two
        # seqs): the whole file was cut, or emptied (a review)
        opens = [a for a in anchored if a.reason == "open"]
        start = min(opens, key=lambda a: a.line).seq if opens else 0  # (the file's first)
        later = [a for a in anchored if a.reason != "open" or a.seq > start]
        if later:
            a = max(later, key=lambda x: x.seq)
            raise AuditLogError(
                f"the {a.reason} anchor written at {a.ts} (anchor line {a.line}) records seq "
                f"{a.seq}, but the file holds no whole record: it was cut or emptied; "
                "nothing was cut or written", path=name, line=1)
        return
    seq, head = read_head(fd, name, end=end)
    lines = count_newlines(fd, end)
    furthest = max(anchored, key=lambda a: a.seq)
    if furthest.seq > seq:
        raise AuditLogError(
            f"the {furthest.reason} anchor written at {furthest.ts} (anchor line "
            f"{furthest.line}) records seq {furthest.seq}, but the file's last whole record "
            f"is seq {seq}: {furthest.seq - seq} record(s) anchored before are gone — cut off "
            "(or lost to a power cut under durability 'none'); nothing was cut or written",
            path=name, line=lines + 1)
    for a in anchored:
        if a.seq == seq and a.hash != head:
            raise AuditLogError(
                f"the last record (seq {seq}) is not the one the {a.reason} anchor written at "
                f"{a.ts} (anchor line {a.line}) recorded: the log was rewritten; nothing was "
                "cut or written", path=name, line=lines)
    last = max(anchored, key=lambda a: a.line)
    if last.reason == "close" and (seq > last.seq or torn):
        after = seq - last.seq
        what = " and ".join([*([f"{after} record(s)"] * (after > 0)),
                             *(["a torn line"] * torn)])
        raise AuditLogError(
            f"the writer closed this file at seq {last.seq} (the close anchor written at "
            f"{last.ts}, anchor line {last.line}), and {what} follow it: a writer that "
            "reopens a file anchors 'open' first, so they were added by someone else — "
            "damage, not a crash — or a writer could not write its anchors (the log then "
            "says ANCHOR_WRITE_FAILED): check it (audit verify --anchors), then start a new "
            "log with a recorded reason; nothing was cut or written",
            path=name, line=lines - after + 1)


def find_torn_tail(fd: int) -> tuple[int, bytes] | None:
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


def cut_torn_tail(fd: int, name: str, durability: str, key: bytes | None,
                   verify: bool) -> TornCut | None:
    """Cut a last line without ``\\n`` back to the end of the last whole line; describe the cut.

    The whole records before it must verify first: a log that is damaged
    elsewhere is not touched.
    """
    found = find_torn_tail(fd)
    if found is None:
        return None
    offset, torn = found
    line = count_newlines(fd, offset) + 1
    if verify and offset:
        check_verified(verify_tail(name, key=key, end=offset), name, key,
                        where=" (the torn last line was not cut)")
    os.ftruncate(fd, offset)
    if durability != "none":
        os.fsync(fd)
    return TornCut(line, offset, len(torn), hashlib.sha256(torn).hexdigest())


def fsync_dir(directory: Path) -> None:
    """Make a newly created file's directory entry durable."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. platforms without directory fds
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
