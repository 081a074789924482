"""The tampering matrix of docs/audit-log.md: each row a tampering, each column a way to
verify; every cell is checked here (issue 8, "Done when").

The forger can rewrite the log directory at will but holds neither the table's key nor the
anchor file (kept on another disk, host or owner). Three days of one table are written
through the real session with a key and anchors; each row tampers with a copy, then
``shoewarden audit verify`` runs as an auditor would, over the whole set — plain (the hash
chain), ``--key``, ``--anchors`` — and must exit 1 exactly where the matrix says "caught",
and 0 where it says the option cannot see it. A forgery that some column cannot see is
documented as such, not hidden: that is why keys and anchors exist.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_audit_helpers import (
    DAYS,
    KEY,
    day_events,
    feed_log,
    line_of,
    read_lines,
    rehash,
    rotated_set,
    write_lines,
)

from controller.audit import AnchorSink, open_table_log, read_anchors, table_files, verify_set
from controller.cli import main
from controller.events import parse_event
from controller.profiles import load_profile
from controller.session import TableSession

OTHER_KEY = bytes(range(100, 132))


@dataclass
class Table:
    root: Path  # holds logs/, anchors.jsonl, audit.key
    files: list[Path]

    @property
    def anchors(self) -> Path:
        return self.root / "anchors.jsonl"

    @property
    def key(self) -> Path:
        return self.root / "audit.key"


def _key_file(root: Path) -> None:
    path = root / "audit.key"
    path.write_text(KEY.hex() + "\n")
    path.chmod(0o600)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Table:
    root = tmp_path_factory.mktemp("closed")
    files = rotated_set(root / "logs", key=KEY, anchors=AnchorSink(root / "anchors.jsonl",
                                                                   syslog=False))
    _key_file(root)
    return Table(root, files)


@pytest.fixture(scope="module")
def pristine_live(tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, Path]:
    """A table in the middle of its day: the log is open, the last round still being dealt.
    Also keeps a copy of the log as it stood three rounds earlier (for the roll back)."""
    root = tmp_path_factory.mktemp("live")
    profile = load_profile("gr-blackjack")
    events = day_events(profile, DAYS[0], seed=3)
    log = open_table_log(root / "logs", "T1", DAYS[0], key=KEY, durability="none",
                         anchors=AnchorSink(root / "anchors.jsonl", syslog=False))
    ends = [i for i, e in enumerate(events) if e["type"] == "round_end"]
    earlier = root / "earlier.jsonl"
    session = TableSession(profile, log, {"durability": "none"})
    for n, event in enumerate(events[:ends[-3] + 3], start=1):  # stops mid-round
        session.feed(parse_event(event), line=n)
        if n == ends[-6] + 1:
            log.sync()
            shutil.copy(log.writer.name, earlier)
    log.sync()
    _key_file(root)
    # the writer stays open: a live table (the file is complete up to its last record)
    return Table(root, [Path(log.writer.name)]), earlier


def copy_of(src: Table, tmp: Path) -> Table:
    shutil.copytree(src.root, tmp / "t")
    return Table(tmp / "t", [tmp / "t" / f.relative_to(src.root) for f in src.files])


def records_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in read_lines(path)]


def rewrite_chain(t: Table, change: Callable[[int, int, dict], dict | None], *,
                  key: bytes | None) -> None:
    """Re-seal every record of the set after ``change(file index, line, record)`` (which may
    edit a record or return None to drop it): new prev/hash links, new ``continues`` links,
    and — with ``key`` — new MACs under that key (None: MACs dropped altogether)."""
    prev_hash, prev_mac, prev_file = "0" * 64, "0" * 64, None
    for i, path in enumerate(t.files):
        out = []
        for n, rec in enumerate(records_of(path), start=1):
            rec = change(i, n, rec)
            if rec is None:
                continue
            chain = rec.get("chain")
            if isinstance(chain, dict):
                if "continues" in chain:
                    chain["continues"].update(file=prev_file, hash=prev_hash)
                    if key is not None:
                        chain["continues"]["mac"] = prev_mac
                    else:
                        chain["continues"].pop("mac", None)
                if key is None:
                    chain.pop("mac", None)
                elif isinstance(chain.get("mac"), dict):
                    chain["mac"]["key_id"] = hmac.new(
                        key, b"shoewarden audit key id", hashlib.sha256).hexdigest()[:16]
                if not chain:
                    rec.pop("chain")
            if n > 1 or "continues" in (chain or {}) or i == 0:
                rec["prev"] = prev_hash
            rec.pop("mac", None)
            if key is not None:
                body = {k: v for k, v in rec.items() if k not in ("hash", "mac")}
                canon = json.dumps(body, sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False).encode()
                rec["mac"] = hmac.new(key, prev_mac.encode() + canon,
                                      hashlib.sha256).hexdigest()
                prev_mac = rec["mac"]
            rec = rehash(rec)
            prev_hash = rec["hash"]
            out.append(line_of(rec))
        write_lines(path, out)
        prev_file = path.name


def _card_at(i: int, n: int, rec: dict, target: tuple[int, int]) -> dict:
    if (i, n) == target:
        rec["event"]["card"] = "AS" if rec["event"]["card"] != "AS" else "KD"
    return rec


def _a_card_line(path: Path) -> int:
    return next(n for n, r in enumerate(records_of(path), start=1)
                if n > 20 and r["kind"] == "input" and r["event"]["type"] == "card")


# ------------------------------------------------------------------ the tamperings


def edit(t: Table) -> None:
    """One card changed, nothing recomputed."""
    path = t.files[1]
    n = _a_card_line(path)
    lines = read_lines(path)
    lines[n - 1] = line_of(_card_at(1, n, json.loads(lines[n - 1]), (1, n)))
    write_lines(path, lines)


def rechain(t: Table) -> None:
    """One card changed and every hash after it recomputed (the forger has no key: the
    MACs stay as they were, and no longer match)."""
    n = _a_card_line(t.files[1])
    target = (1, n)
    prev_hash = None
    for i, path in enumerate(t.files):
        out = []
        for m, rec in enumerate(records_of(path), start=1):
            rec = _card_at(i, m, rec, target)
            if prev_hash is not None:
                if m == 1:
                    rec["chain"]["continues"]["hash"] = prev_hash
                rec["prev"] = prev_hash
            if (i, m) >= target:
                rec = rehash(rec)
            prev_hash = rec["hash"]
            out.append(line_of(rec))
        write_lines(path, out)


def truncate(t: Table) -> None:
    """The last 40 records of the closed day cut off."""
    lines = read_lines(t.files[-1])
    write_lines(t.files[-1], lines[:-40])


def delete_first(t: Table) -> None:
    t.files[0].unlink()


def delete_middle(t: Table) -> None:
    t.files[1].unlink()


def delete_last(t: Table) -> None:
    t.files[-1].unlink()


def roll_back(t: Table) -> None:
    """The log put back as it stood three rounds earlier (a backup restored)."""
    shutil.copy(t.root / "earlier.jsonl", t.files[0])


def strip_macs(t: Table) -> None:
    """Every MAC and the MAC chain's declaration removed, the plain chain recomputed: the set
    now looks like a log that never had a key — with one card changed."""
    n = _a_card_line(t.files[1])
    rewrite_chain(t, lambda i, m, rec: _card_at(i, m, rec, (1, n)), key=None)


def re_key(t: Table) -> None:
    """Every record re-signed under the forger's own key, one card changed."""
    n = _a_card_line(t.files[1])
    rewrite_chain(t, lambda i, m, rec: _card_at(i, m, rec, (1, n)), key=OTHER_KEY)


def live_tail_cut(t: Table) -> None:
    """A live table's log cut back by the last completed round and the round in progress."""
    path = t.files[0]
    recs = records_of(path)
    notes = [n for n, r in enumerate(recs, start=1)
             if r["kind"] == "output" and r["output"]["type"] == "note"
             and r["output"]["kind"] == "round"]
    write_lines(path, read_lines(path)[:notes[-2]])


def live_cut_within_the_round(t: Table) -> None:
    """A live table's log cut back to its last round end: only the round in progress."""
    path = t.files[0]
    recs = records_of(path)
    last_note = max(n for n, r in enumerate(recs, start=1)
                    if r["kind"] == "output" and r["output"]["type"] == "note"
                    and r["output"]["kind"] == "round")
    assert last_note < len(recs) - 2  # there was a round in progress to lose
    write_lines(path, read_lines(path)[:last_note])


# row: (tampering, live table?, caught by: chain alone, --key, --anchors)
MATRIX = [
    (edit, False, True, True, True),
    (rechain, False, False, True, True),
    (truncate, False, False, False, True),
    (delete_first, False, True, True, True),
    (delete_middle, False, True, True, True),
    (delete_last, False, False, False, True),
    (roll_back, True, False, False, True),
    (strip_macs, False, False, True, True),
    (re_key, False, False, True, True),
    (live_tail_cut, True, False, False, True),
    (live_cut_within_the_round, True, False, False, False),
]
COLUMNS = ("chain", "key", "anchors")


def verify_exit(t: Table, column: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    logs = [str(p) for p in table_files(t.root / "logs", "T1")]
    extra = {"chain": [], "key": ["--key", str(t.key)],
             "anchors": ["--anchors", str(t.anchors)]}[column]
    code = main(["audit", "verify", *extra, *logs])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize(("tamper", "live", "by_chain", "by_key", "by_anchors"), MATRIX,
                         ids=[row[0].__name__ for row in MATRIX])
def test_tampering_matrix(tamper: Callable[[Table], None], live: bool, by_chain: bool,
                          by_key: bool, by_anchors: bool, column: str, pristine: Table,
                          pristine_live: tuple[Table, Path], tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    t = copy_of(pristine_live[0] if live else pristine, tmp_path)
    if live:
        shutil.copy(pristine_live[1], t.root / "earlier.jsonl")
    code, _ = verify_exit(t, column, capsys)
    assert code == 0, f"the untouched {'live' if live else 'closed'} set must verify ({column})"
    tamper(t)
    code, out = verify_exit(t, column, capsys)
    caught = {"chain": by_chain, "key": by_key, "anchors": by_anchors}[column]
    assert code == (1 if caught else 0), out
    if caught:
        assert "FAILED" in out


def test_matrix_rows_are_in_the_docs() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "audit-log.md").read_text()
    table = doc[doc.index("## Tampering matrix"):]
    for tamper, _, *cells in MATRIX:
        name = tamper.__name__.replace("_", " ")
        row = next((line for line in table.splitlines() if line.startswith(f"| {name} |")),
                   None)
        assert row is not None, f"row {name!r} missing from the tampering matrix"
        marks = [c.strip() for c in row.strip("|").split("|")[2:5]]
        assert marks == ["caught" if c else "—" for c in cells], (name, marks)


def test_missing_files_name_the_file(pristine: Table, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    t = copy_of(pristine, tmp_path)
    t.files[-1].unlink()
    code, out = verify_exit(t, "anchors", capsys)
    assert code == 1 and t.files[-1].name in out and "missing" in out
    t2 = copy_of(pristine, tmp_path / "2")
    t2.files[0].unlink()
    code, out = verify_exit(t2, "chain", capsys)
    assert code == 1 and t2.files[0].name in out and "missing" in out
    logs = [str(p) for p in t2.files[1:]]
    assert main(["audit", "verify", "--partial", "--anchors", str(t2.anchors), *logs]) == 0


def test_the_live_table_is_anchored_at_every_round_end(pristine_live: tuple[Table, Path]
                                                       ) -> None:
    t = pristine_live[0]
    rounds = sum(1 for r in records_of(t.files[0])
                 if r["kind"] == "output" and r["output"]["type"] == "note"
                 and r["output"]["kind"] == "round")
    reasons = [a.reason for a in read_anchors(t.anchors)]
    assert rounds > 5 and reasons.count("round_end") == rounds


def test_anchors_are_matched_to_their_file_and_chain(tmp_path: Path) -> None:
    """A table with a second chain on one day (….2.jsonl starts again at seq 1): its genuine
    files verify with the anchors, and an edit in either chain is still caught."""
    profile = load_profile("gr-blackjack")
    sink = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    events = day_events(profile, DAYS[0], seed=5)
    log = open_table_log(tmp_path / "logs", "T1", DAYS[0], anchors=sink, durability="none")
    feed_log(log, profile, events[:300]).close()
    first = table_files(tmp_path / "logs", "T1")[0]
    lines = read_lines(first)
    lines[-1] = lines[-1].replace(b'"seq":', b'"seq": ')  # the file breaks at its end
    write_lines(first, lines)
    log = open_table_log(tmp_path / "logs", "T1", DAYS[0], anchors=sink, durability="none",
                         new_log_reason="last line damaged; checked by the pit boss")
    feed_log(log, profile, day_events(profile, DAYS[0], seed=6)).close()  # the day again
    second = table_files(tmp_path / "logs", "T1")[1]
    assert second.name.endswith(".2.jsonl") and json.loads(read_lines(second)[0])["seq"] == 1
    anchors = read_anchors(tmp_path / "anchors.jsonl")
    check = verify_set([second], anchors=anchors, partial=True)
    assert check.ok, [str(p) for t in check.tables for p in t.problems]
    assert check.tables[0].anchors_checked >= 5
    lines = read_lines(second)
    n = next(i for i, line in enumerate(lines) if b'"type":"card"' in line and i > 20)
    rec = json.loads(lines[n])
    rec["event"]["card"] = "AS" if rec["event"]["card"] != "AS" else "KD"
    rec = rehash(rec)
    lines[n] = line_of(rec)  # an edit, the record's own hash recomputed: the next link breaks
    write_lines(second, lines)
    assert not verify_set([second], anchors=anchors, partial=True).ok
    prev = rec["hash"]
    for i in range(n + 1, len(lines)):  # now rechained: only the anchors can see it
        later = json.loads(lines[i])
        later["prev"] = prev
        later = rehash(later)
        prev = later["hash"]
        lines[i] = line_of(later)
    write_lines(second, lines)
    assert verify_set([second], partial=True).ok
    check = verify_set([second], anchors=anchors, partial=True)
    assert not check.ok
    assert any("differs from the anchor" in p.reason for t in check.tables for p in t.problems)


def test_renaming_the_table_in_the_records_does_not_dodge_the_anchors(tmp_path: Path) -> None:
    """The anchors are matched to a file by its name as well as by its table: a forger who
    cuts the tail, renames the table in every record and rechains (no key needed) is caught,
    and the renaming itself is named."""
    profile = load_profile("gr-blackjack")
    sink = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    log = open_table_log(tmp_path / "logs", "T1", DAYS[0], anchors=sink, durability="none")
    feed_log(log, profile, day_events(profile, DAYS[0], seed=5)).close()
    (path,) = table_files(tmp_path / "logs", "T1")
    anchors = read_anchors(tmp_path / "anchors.jsonl")
    assert verify_set([path], anchors=anchors).ok
    lines = read_lines(path)[:-60]  # the tail cut …
    prev = None
    for i, line in enumerate(lines):  # … and every record's table renamed, rechained
        rec = json.loads(line)
        if rec.get("table") == "T1":
            rec["table"] = "T1x"
        if prev is not None:
            rec["prev"] = prev
        rec = rehash(rec)
        prev = rec["hash"]
        lines[i] = line_of(rec)
    write_lines(path, lines)
    assert verify_set([path]).ok  # the chain alone cannot tell (documented)
    check = verify_set([path], anchors=anchors)
    assert not check.ok
    (table,) = check.tables
    assert table.table == "T1x" and table.anchors_checked > 5
    reasons = [p.reason for p in table.problems]
    assert any("truncated tail" in r for r in reasons)
    assert any("as table T1's log, but its records say table T1x" in r for r in reasons)
    assert not any("missing" in r for r in reasons)


@pytest.mark.parametrize(("durability", "synced"), [("input", True), ("every", True),
                                                   ("none", True)])
def test_an_anchor_is_written_only_once_its_record_is_on_the_disk(
        tmp_path: Path, durability: str, synced: bool) -> None:
    """An anchor names the head of the log; a record only written (an output under 'input')
    can be lost to a power cut and written again by recovery with another hash — the anchor
    would then call a true log rewritten. So the log is fsynced before the anchor is written
    — under 'none' too (one fsync a round end): there, a power cut after an anchor made the
    restart refuse a log whose anchors named records the cut took (a review)."""
    profile = load_profile("gr-blackjack")
    sink = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    log = open_table_log(tmp_path / "logs", "T1", DAYS[0], anchors=sink, durability=durability)
    calls: list[str] = []
    writer, write = log.writer, sink.write
    real_sync = writer.sync

    def sync() -> None:
        calls.append("fsync log")
        real_sync()

    def anchor(**fields: object) -> object:
        calls.append("anchor")
        return write(**fields)

    writer.sync = sync  # type: ignore[method-assign]
    sink.write = anchor  # type: ignore[method-assign]
    feed_log(log, profile, day_events(profile, DAYS[0], seed=5)[:120])
    assert "anchor" in calls
    if synced:  # every anchor follows an fsync of the log
        assert all(calls[i - 1] == "fsync log" for i, c in enumerate(calls) if c == "anchor")
    else:
        assert "fsync log" not in calls
    log.close()


def test_a_day_without_a_date_in_its_name_keeps_working(tmp_path: Path) -> None:
    """Files not named by the layout are taken in command-line order (unchanged)."""
    profile = load_profile("gr-blackjack")
    log = open_table_log(tmp_path / "logs", "T9", dt.date(2026, 11, 22), durability="none")
    feed_log(log, profile, day_events(profile, dt.date(2026, 11, 22), table="T9")).close()
    (path,) = table_files(tmp_path / "logs", "T9")
    renamed = path.with_name("evidence.jsonl")
    path.rename(renamed)
    assert verify_set([renamed]).ok


# ------------------------------------------------------------------ anchors that fail


def test_a_failed_anchor_write_leaves_no_half_line(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import controller.audit.anchors as anchors_mod

    path = tmp_path / "anchors.jsonl"
    sink = AnchorSink(path, syslog=False)
    sink.write(table="T1", file="T1-x.jsonl", seq=1, hash="a" * 64, reason="open", ts="t")
    before = path.read_bytes()
    real_write = anchors_mod.os.write

    def half(fd: int, data: bytes) -> int:  # a disk that fills up mid-line
        return real_write(fd, data[: len(data) // 2])
    monkeypatch.setattr(anchors_mod.os, "write", half)
    with pytest.raises(OSError):
        sink.write(table="T1", file="T1-x.jsonl", seq=2, hash="b" * 64, reason="round_end",
                   ts="t")
    assert path.read_bytes() == before
    monkeypatch.setattr(anchors_mod.os, "write", real_write)
    sink.write(table="T1", file="T1-x.jsonl", seq=3, hash="c" * 64, reason="round_end", ts="t")
    assert [a.seq for a in read_anchors(path)] == [1, 3]


def test_a_torn_last_anchor_line_is_a_note(pristine: Table, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    t = copy_of(pristine, tmp_path)
    with open(t.anchors, "ab") as f:
        f.write(b'{"file":"T1-2026-11-21.jsonl","hash":"ab')
    code, out = verify_exit(t, "anchors", capsys)
    assert code == 0, out
    assert "torn last anchor line" in out


def test_when_anchors_cannot_be_written_the_table_goes_on_and_the_log_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import controller.audit.anchors as anchors_mod

    profile = load_profile("gr-blackjack")
    events = day_events(profile, DAYS[0], seed=4)
    ends = [i for i, e in enumerate(events) if e["type"] == "round_end"]
    real = anchors_mod._append_whole
    full = {"on": False}

    def maybe_full(path: str, line: bytes, *, fsync: bool) -> None:
        if full["on"]:
            raise OSError(28, "No space left on device")
        real(path, line, fsync=fsync)
    monkeypatch.setattr(anchors_mod, "_append_whole", maybe_full)
    log = open_table_log(tmp_path / "logs", "T1", DAYS[0], durability="none",
                         anchors=AnchorSink(tmp_path / "anchors.jsonl", syslog=False))
    session = TableSession(profile, log, {"durability": "none"})
    for n, event in enumerate(events, start=1):
        full["on"] = ends[2] <= n - 1 < ends[6] or n - 1 >= ends[9]  # two spells of a full disk
        session.feed(parse_event(event), line=n)
    session.close()
    assert session.tally.rounds == len(ends)  # every round was dealt
    assert session.tally.deviations["ANCHOR_WRITE_FAILED"] == 2  # one per spell
    (path,) = table_files(tmp_path / "logs", "T1")
    inputs = [r["event"] for r in records_of(path) if r["kind"] == "input"
              and r["event"]["type"] == "device_diagnostic"]
    assert [e["code"] for e in inputs] == ["ANCHOR_WRITE_FAILED"] * 2
    assert "No space left on device" in inputs[0]["detail"] and inputs[0]["device"] == "audit"
    assert main(["audit", "replay", str(path)]) == 0  # the alert replays from the log
    assert "identical" in capsys.readouterr().out


def test_a_bad_anchor_line_is_named_by_its_line(tmp_path: Path) -> None:
    """The anchor file is decoded line by line, like every other reader: an invalid UTF-8 byte
    used to be refused with a byte offset of the whole file and no line."""
    from controller.audit import AnchorFileError

    path = tmp_path / "anchors.jsonl"
    sink = AnchorSink(path, syslog=False)
    for seq in (1, 2, 3):
        sink.write(table="T1", file="T1-x.jsonl", seq=seq, hash="a" * 64, reason="round_end",
                   ts="t")
    lines = read_lines(path)
    good = list(lines)
    lines[1] = lines[1].replace(b'"round_end"', b'"round\xff_end"')
    write_lines(path, lines)
    with pytest.raises(AnchorFileError) as info:
        read_anchors(path)
    assert info.value.line == 2 and "not UTF-8" in str(info.value), str(info.value)
    lines = [*good, b'{"file":"T1-x.jsonl","seq":4,"reason":"round\xe2\x80\xa8end","hash":"'
             + b"b" * 64 + b'","table":"T1","ts":"t"}']  # U+2028 is no line break in JSONL
    write_lines(path, lines)
    assert [a.seq for a in read_anchors(path)] == [1, 2, 3, 4]
