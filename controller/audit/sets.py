"""Verify many log files at once: rotated sets, several tables, keys and anchors.

Files are grouped by table (the first record's ``table``, else the file name)
and ordered by the date and part in their names (command-line order when a
name does not follow the layout). Each file is verified on its own
(:func:`controller.audit.verify.verify_file`: its first record says where its
chain starts), then the links between consecutive files are checked: the
first record of a file must continue the last record of the file before it,
which it names. That finds:

- a file **left out** of the set (the next file continues a file that is not there);
- a **truncated tail** (the next file continues from a seq past the end of this one);
- records **appended** to a file after the next file began (the next file
  continues from a seq before this file's end).

With anchors (:mod:`controller.audit.anchors`) every anchored head must be in
the chain with the anchored hash; an anchor past the end of its file is a cut
tail, and records after a ``close`` anchor that no later ``open`` anchor
explains were appended by someone other than the writer.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller import jsontext
from controller.audit.anchors import Anchor
from controller.audit.files import parse_log_name
from controller.audit.records import Meter
from controller.audit.verify import REORDERED, TORN, WRONG_KEY, VerifyResult, verify_file
from controller.inputfiles import file_problem
from controller.jsontext import JsonTextError

# Problem kinds added by the set checks (file-level kinds are in controller.audit.verify).
TRUNCATED = "truncated"
APPENDED = "appended"
FILE_MISSING = "file-missing"
REWRITTEN = "rewritten"
NEW_CHAIN = "new-chain"


@dataclass(frozen=True)
class Problem:
    """Where the chain breaks: file, 1-based line, the seq there, why, and a classification."""

    file: str
    line: int | None
    seq: int | None
    reason: str
    kind: str | None
    detail: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}: line {self.line}"
        seq = "" if self.seq is None else f" (seq {self.seq})"
        text = f"{where}{seq}: {self.reason}"
        if self.kind:
            text += f" [{self.kind}" + (f": {self.detail}" if self.detail else "") + "]"
        return text

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "seq": self.seq, "reason": self.reason,
                "kind": self.kind, "detail": self.detail}


@dataclass
class FileCheck:
    path: Path
    result: VerifyResult

    @property
    def name(self) -> str:
        return self.path.name

    def line_of(self, seq: int) -> int:
        """Line of ``seq`` in this file (records are one per line, seq without gaps)."""
        return seq - self.result.start.seq


@dataclass
class TableCheck:
    table: str
    files: list[FileCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    anchors_checked: int = 0
    mac: str = "none"  # "checked", "not checked", "none"

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def records(self) -> int:
        return sum(f.result.records for f in self.files)

    @property
    def head(self) -> tuple[int, str]:
        last = self.files[-1].result
        return last.head_seq, last.head

    @property
    def wrong_key(self) -> bool:
        return any(f.result.problem == WRONG_KEY for f in self.files)

    def summary(self) -> list[str]:
        n = len(self.files)
        seq, head = self.head
        first = self.files[0].result.start.seq + 1
        status = "ok" if self.ok else "FAILED"
        out = [f"table {self.table}: {status}: {n} file(s), {self.records} record(s) verified"
               + (f" (seq {first}–{seq}), head {head}" if self.ok and self.records else "")]
        for p in self.problems:
            out.append(f"  {p}")
        if self.mac == "checked":
            out.append("  HMAC chain: checked with the key on every record")
        elif self.mac == "not checked":
            macs = sum(f.result.macs for f in self.files)
            out.append(f"  HMAC chain: NOT checked: {macs} record(s) carry a mac and no key was "
                       "given (--key). The plain hash chain was checked; someone able to "
                       "rewrite the files could have recomputed it. Only the key, or anchors, "
                       "can show that they did not.")
        if self.anchors_checked:
            out.append(f"  anchors: {self.anchors_checked} checked")
        for note in self.notes:
            out.append(f"  note: {note}")
        return out

    def to_dict(self) -> dict[str, object]:
        seq, head = self.head
        return {
            "table": self.table, "ok": self.ok, "records": self.records,
            "head": {"seq": seq, "hash": head},
            "files": [{"file": str(f.path), "records": f.result.records, "ok": f.result.ok,
                       "first_seq": f.result.start.seq + 1, "last_seq": f.result.head_seq}
                      for f in self.files],
            "problems": [p.to_dict() for p in self.problems], "mac": self.mac,
            "anchors_checked": self.anchors_checked, "notes": self.notes,
        }


@dataclass
class SetCheck:
    tables: list[TableCheck] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unreadable and all(t.ok for t in self.tables)

    @property
    def exit_code(self) -> int:
        """0 intact, 1 tampered, 2 unreadable input.

        A log whose MACs were made with another key than the one given is tampered (1): it
        was re-signed by someone else — or the auditor holds the wrong key, which the
        message says; a log the key holder wrote never fails this way with their key."""
        if self.unreadable:
            return 2
        return 0 if self.ok else 1

    def lines(self) -> list[str]:
        """The report, one line per item (unreadable inputs are in :attr:`unreadable`)."""
        out: list[str] = []
        for t in self.tables:
            out += t.summary()
        return out


def _first_record(path: Path) -> dict[str, object] | None:
    with open(path, "rb") as f:
        first = f.readline()
    try:
        obj = jsontext.loads(first)
    except JsonTextError:
        return None
    return obj if isinstance(obj, dict) else None


#: a record has at least one of these (an input stream's events have none)
RECORD_KEYS = ("seq", "hash", "kind")


_LOOK_AT = 200  # lines
_LINE_CAP = 1 << 20  # bytes


def not_a_log(path: Path) -> str | None:
    """Why the file looks like no audit log at all — empty, or none of its first 200 lines
    a JSON object with a record's own fields (an input stream given by mistake) — or None.
    ``verify`` only adds it as a hint beside the chain's verdict (records stripped of their
    fields are still a log that was edited); ``report``, ``replay`` and ``recover`` refuse
    such a file. One record among those lines makes it a log."""
    seen = objects = 0
    with open(path, "rb") as f:
        for _ in range(_LOOK_AT):
            line = f.readline(_LINE_CAP + 1)  # (a forged line of gigabytes is not read whole)
            if not line:
                break
            seen += 1
            if len(line) > _LINE_CAP:
                return None  # no input event is that long: the chain check says what it is
            if not line.strip():
                continue
            if not line.startswith(b"{"):  # no record, whole or cut short (text, binary:
                continue  # a review's notes were "recovered", the file replaced)
            objects += 1
            try:
                obj = jsontext.loads(line)
            except JsonTextError:
                return None
            if not isinstance(obj, dict) or any(k in obj for k in RECORD_KEYS):
                return None
    if not seen:
        return ("empty: it holds no record (a table's log starts with its header; the file "
                "was made and never written, or emptied)")
    if not objects:
        return ("not an audit log: none of its first lines is a JSON record (text, or "
                "another program's file, given for a log?)")
    return ("not an audit log: its lines are JSON objects with no seq, hash or kind "
            "(an input stream, or another program's file, given for a log?)")


def _continued(first: dict[str, object] | None) -> str | None:
    """The file a log's first record says it continues (``chain.continues.file``), if any."""
    chain = first.get("chain") if first is not None else None
    cont = chain.get("continues") if isinstance(chain, dict) else None
    name = cont.get("file") if isinstance(cont, dict) else None
    return name if isinstance(name, str) else None


def _table_of(path: Path, first: dict[str, object] | None) -> str:
    if first is not None and isinstance(first.get("table"), str):
        return str(first["table"])
    parsed = parse_log_name(path.name)
    return parsed.table if parsed else path.stem


def verify_set(
    paths: Iterable[str | os.PathLike[str]],
    *,
    key: bytes | None = None,
    anchors: Sequence[Anchor] | None = None,
    partial: bool = False,
    meter: Meter | None = None,
) -> SetCheck:
    """Verify every file, grouped by table, with the links between files and the anchors.

    A file of a table that the chain (the first file given continues another) or the
    anchors know of, and that was not given, is a problem (``file-missing``): deleting a
    table's oldest or newest day file must not pass. ``partial`` says the files given are
    knowingly part of a set: then such files are notes."""
    report = SetCheck()
    # a table's files live in one directory: the same id in two directories is two tables
    # (two floors, two casinos), never one chain with a break in it. Only files named as a
    # table's day files (<table>-<date>[.n].jsonl) form a chain; a file named otherwise is a
    # log of its own (`bench --log FILE.jsonl`): two such days of one table in one directory
    # were "a new chain without a recorded reason" (a review: genuine logs called tampered)
    groups: dict[tuple[str, str, str], list[Path]] = defaultdict(list)
    firsts: list[tuple[Path, dict[str, object] | None]] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        try:
            why = file_problem(path, pipes=False)  # (each file is read twice)
            if why is not None:
                raise OSError(0, "a directory, not a log file" if why == "a directory" else why)
            first = _first_record(path)
        except OSError as exc:
            report.unreadable.append(f"{path}: {exc.strerror or exc}")
            continue
        firsts.append((path, first))
    # ... unless a link says otherwise: a file that continues another, or that another given
    # continues, is in the chain whatever its name (a day file renamed '.orig' is still one)
    conts = [_continued(first) for _, first in firsts]
    continued = {name for name in conts if name}
    for (path, first), cont in zip(firsts, conts, strict=True):
        alone = "" if (parse_log_name(path.name) is not None or cont
                       or path.name in continued) else path.name
        groups[(_table_of(path, first), os.path.dirname(os.path.realpath(path)),
                alone)].append(path)
    by_table: dict[str | None, list[Anchor]] = defaultdict(list)
    for anchor in anchors or ():
        by_table[anchor.table].append(anchor)
    given = {p.name for files in groups.values() for p in files}
    ids = [table for table, _, _ in groups]
    for (table, directory, alone), files in groups.items():
        names = [parse_log_name(p.name) for p in files]
        if all(n is not None for n in names):
            files = [p for _, p in sorted(zip(names, files, strict=True))]
        # the table's anchors, and every anchor that names one of these files, whatever
        # table it says: the table id is in the records, which whoever rewrites them can
        # change — an anchor must not be dodged by renaming the table
        mine = {p.name for p in files}
        table_anchors = by_table.get(table, []) + [
            a for a in anchors or () if a.table != table and a.file in mine]
        label = table if ids.count(table) == 1 else \
            f"{table} ({os.path.join(directory, alone) if alone else directory})"
        check = _verify_table(label, files, key, table_anchors, anchors is not None, report,
                              partial, meter, given)
        if check is not None:
            _check_anchored_table(check, table, table_anchors)
            report.tables.append(check)
    return report


def _check_anchored_table(check: TableCheck, table: str, anchors: list[Anchor]) -> None:
    """A file the anchors give to another table than its records name was rewritten (its
    table renamed, as a forger would to dodge the table's anchors)."""
    by_name = {fc.name: fc for fc in check.files}
    told: set[str] = set()
    for a in anchors:
        fc = by_name.get(a.file)
        if fc is None or a.table is None or a.table == table or a.file in told:
            continue
        told.add(a.file)
        check.problems.append(Problem(
            str(fc.path), 1, None,
            f"the {a.kind} {a.made} at {a.ts} ({a.kind} line {a.line}) names this file as table "
            f"{a.table}'s log, but its records say table {table}: the log was rewritten",
            REWRITTEN, "table id changed"))


def _verify_table(table: str, files: list[Path], key: bytes | None, anchors: list[Anchor],
                  use_anchors: bool, report: SetCheck, partial: bool,
                  meter: Meter | None = None, given: Set[str] = frozenset()
                  ) -> TableCheck | None:
    check = TableCheck(table)
    want = {a.seq for a in anchors}
    for path in files:
        try:
            result = verify_file(path, key=key, want_hashes=want, meter=meter)
        except OSError as exc:
            report.unreadable.append(f"{path}: {exc.strerror or exc}")
            continue
        check.files.append(FileCheck(path, result))
    if not check.files:
        return None
    for i, fc in enumerate(check.files):
        r = fc.result
        if not r.ok:
            check.problems.append(Problem(str(fc.path), r.first_bad_line, r.first_bad_seq,
                                          r.reason or "", r.problem, r.detail))
            why = not_a_log(fc.path)  # (a hint only: the verdict is the chain's)
            if why is not None:
                check.notes.append(f"{fc.name}: {why}")
        elif r.records == 0:  # a table's log starts with its header: none is no log verified
            check.problems.append(Problem(
                str(fc.path), None, None, "empty: the file holds no record (a table's log "
                "starts with its header): made and never written, or emptied", TRUNCATED))
        _check_link(check, i, partial)
    if use_anchors:
        _check_anchors(check, anchors, partial, given)
    keyed = any(f.result.keyed or f.result.macs for f in check.files)
    if key is not None:
        check.mac = "checked" if check.ok else "none"
    elif keyed:
        check.mac = "not checked"
    return check


def _check_link(check: TableCheck, i: int, partial: bool) -> None:
    fc = check.files[i]
    r = fc.result
    chain = r.chain or {}
    new_chain = chain.get("new_chain")
    cont = chain.get("continues")
    if isinstance(new_chain, dict):
        prev = new_chain.get("previous") or {}
        check.notes.append(
            f"{fc.name} starts a new chain; recorded reason: {new_chain.get('reason')!r}; "
            f"previous file {prev.get('file')} verified up to seq {prev.get('seq')} "
            f"(problem: {prev.get('problem')})")
    if isinstance(cont, dict) and _misnamed(check, i, cont):
        return
    if i == 0:
        if isinstance(cont, dict):
            where = fc.path.parent / str(cont.get("file"))
            there = " (it is in the same directory)" if where.is_file() else ""
            what = (f"{fc.name} continues {cont.get('file')} from seq {cont.get('seq')}; that "
                    f"file was not given{there}")
            if partial:
                check.notes.append(f"{what}, so the link to it is not checked")
            else:
                check.problems.append(Problem(
                    str(cont.get("file")), None, cont.get("seq") if isinstance(
                        cont.get("seq"), int) else None,
                    f"{what}: the file before it is missing", FILE_MISSING,
                    "deleted, or left out (--partial checks only the files given)"))
        return
    before = check.files[i - 1]
    b = before.result
    if isinstance(new_chain, dict):
        return
    if not isinstance(cont, dict):
        if r.records or r.first_bad_line:
            check.problems.append(Problem(
                str(fc.path), 1, 1 if r.records else r.first_bad_seq,
                f"starts a new chain after {before.name} without a recorded reason",
                "start", "the first record does not continue the previous file"))
        return
    c_file, c_seq, c_hash = cont.get("file"), cont.get("seq"), cont.get("hash")
    if c_file != before.name:
        check.problems.append(Problem(
            str(fc.path), 1, (c_seq + 1) if isinstance(c_seq, int) else None,
            f"continues {c_file} (seq {c_seq}), but the file before it in the set is "
            f"{before.name} (ends at seq {b.head_seq})", FILE_MISSING,
            f"{c_file} was left out of the rotated set"))
        return
    if not b.ok or not isinstance(c_seq, int):
        return  # the break in the file before is already reported
    if c_seq > b.head_seq:
        check.problems.append(Problem(
            str(before.path), b.lines + 1, b.head_seq + 1,
            f"truncated tail: the file ends at seq {b.head_seq} (line {b.lines}), but "
            f"{fc.name} continues it from seq {c_seq}", TRUNCATED,
            f"{c_seq - b.head_seq} record(s) cut off the end"))
    elif c_seq < b.head_seq:
        check.problems.append(Problem(
            str(before.path), before.line_of(c_seq + 1), c_seq + 1,
            f"records after seq {c_seq}, where {fc.name} continues the chain: the file goes on "
            f"to seq {b.head_seq}", APPENDED, "forged record(s) appended"))
    elif c_hash != b.head:
        check.problems.append(Problem(
            str(fc.path), 1, c_seq + 1,
            f"continues {before.name} at seq {c_seq} with hash {c_hash}, but that record's "
            f"hash is {b.head}", REWRITTEN, "the end of the earlier file was rewritten"))
    elif r.keyed and r.mac_checked and cont.get("mac") != b.mac_head:
        check.problems.append(Problem(str(fc.path), 1, c_seq + 1,
                                      "the MAC chain does not continue the previous file", "mac"))


def _misnamed(check: TableCheck, i: int, cont: dict[str, object]) -> bool:
    """Does file ``i`` say it continues a file of the set that is not the one before it —
    itself, or one after it? Then the files' names do not match their contents (renamed, or
    their contents swapped): one problem, where "that file was not given" or "left out"
    named a file that was given (a review)."""
    fc = check.files[i]
    names = [f.name for f in check.files]
    c_file, c_seq = cont.get("file"), cont.get("seq")
    if not isinstance(c_file, str) or c_file not in names[i:]:
        return False
    which = "itself" if c_file == fc.name else f"{c_file}, which comes after it in the set"
    check.problems.append(Problem(
        str(fc.path), 1, (c_seq + 1) if isinstance(c_seq, int) else None,
        f"its first record continues {which} (from seq {c_seq}): the files' names do not "
        "match their contents", REORDERED, "files renamed, or their contents swapped"))
    return True


def _whole(r: VerifyResult) -> bool:
    """Did the file verify up to its last whole record (a torn last line at most)? Its
    anchors are then checked against that record: a torn line must not hide a cut tail, or
    records after a close (a review)."""
    return r.ok or r.problem == TORN


def _not_a_crash(check: TableCheck, fc: FileCheck, why: str) -> None:
    """The file's torn last line, which verification calls a crash's that recovery cuts
    back, is not one (``why``): say so where it is reported (recovery refuses it too)."""
    for i, p in enumerate(check.problems):
        if p.file == str(fc.path) and p.kind == TORN:
            check.problems[i] = replace(p, detail=f"not a crash: {why}; recover refuses it")


def _check_anchors(check: TableCheck, anchors: list[Anchor], partial: bool,
                   given: Set[str] = frozenset()) -> None:
    """Every anchor against the record it names, matched by file *and* seq: a table's
    second chain of a day (``….2.jsonl``) starts again at seq 1, so a seq alone could match
    the wrong file — and let an edit hide behind the other chain. A file given but grouped
    under another table (its records name another) is checked there, not missing here."""
    by_name = {fc.name: fc for fc in check.files}
    not_given: dict[str, Anchor] = {}
    last_for: dict[str, Anchor] = {}
    furthest: dict[str, Anchor] = {}  # per file, the anchor furthest past its end
    for a in anchors:
        fc = by_name.get(a.file)
        if fc is None:
            if a.file in given:
                continue
            if a.seq and (a.file not in not_given or a.seq >= not_given[a.file].seq):
                not_given[a.file] = a
            continue
        # the writer's last anchor of the file, by its line in the anchor file: the list is
        # grouped by table, so a file-mode log's 'open' anchor (written before the table
        # was known: table null) came after its 'close' and hid the records appended
        # after it (a review); a witness's checkpoint is no writer's word on closing
        if a.kind == "anchor" and (a.file not in last_for or a.line >= last_for[a.file].line):
            last_for[a.file] = a
        if a.seq == 0:
            continue
        r = fc.result
        h = r.hashes.get(a.seq)
        if h is None and a.seq == r.start.seq:
            h = r.start.hash  # the 'open' anchor of a file continuing another: its start
        if h is not None:
            check.anchors_checked += 1
            if h != a.hash:
                check.problems.append(Problem(
                    str(fc.path), max(fc.line_of(a.seq), 1), a.seq,
                    f"record differs from the {a.kind} {a.made} at {a.ts} ({a.reason}, "
                    f"{a.kind} line {a.line}): the log was rewritten at or before this record",
                    REWRITTEN, "hashes recomputed after an edit"))
            continue
        if _whole(r) and a.seq > r.head_seq:
            check.anchors_checked += 1
            if a.file not in furthest or a.seq > furthest[a.file].seq:
                furthest[a.file] = a
    for name, a in furthest.items():  # one cut tail a file: named by the furthest anchor
        fc = by_name[name]
        r = fc.result
        last = fc.line_of(r.head_seq)
        then = ", then a torn line" if r.problem == TORN else ""
        check.problems.append(Problem(
            str(fc.path), last + 1, r.head_seq + 1,
            f"truncated tail: the {a.kind} {a.made} at {a.ts} ({a.reason}, {a.kind} "
            f"line {a.line}) records seq {a.seq}, but the file ends at seq {r.head_seq} "
            f"(line {last}){then}", TRUNCATED, f"{a.seq - r.head_seq} record(s) cut off the end"))
        _not_a_crash(check, fc, "the anchors show records cut off before it")
    for name, a in last_for.items():
        fc = by_name[name]
        r = fc.result
        torn = r.problem == TORN
        if a.reason == "close" and _whole(r) and (r.head_seq > a.seq or torn) \
                and a.seq in r.hashes:
            what = ("record(s)" if r.head_seq > a.seq else "a torn line") + \
                (" and a torn line" if torn and r.head_seq > a.seq else "")
            check.problems.append(Problem(
                str(fc.path), fc.line_of(a.seq) + 1, a.seq + 1,
                f"{what} after the writer closed the file at seq {a.seq} (anchor written at "
                f"{a.ts}, anchor line {a.line}); a writer that reopens a file anchors 'open' "
                "first, and no such anchor follows", APPENDED, "forged record(s) appended"
                if r.head_seq > a.seq else "written after the close: not a crash"))
            _not_a_crash(check, fc, "it follows the writer's close")
    for name, a in sorted(not_given.items()):
        what = (f"the anchors name {name} (up to seq {a.seq}, anchored {a.ts}), which was "
                "not given")
        if partial:
            check.notes.append(what)
        else:
            check.problems.append(Problem(
                name, None, None, f"{what}: a file of this table is missing", FILE_MISSING,
                "deleted, or left out (--partial checks only the files given)"))
