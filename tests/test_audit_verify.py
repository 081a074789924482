"""``audit verify``: rotated sets, several tables, the eight tamperings, HMAC keys, anchors.

Each tampering has a test that makes it (and checks, independently of the code
under test, that the file really is tampered that way) and a test that verify
names it at the right file and line. Logs are real table days written through
TableSession + open_table_log (tests/test_audit_helpers.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_audit_helpers import (
    DAYS,
    GENESIS,
    KEY,
    KEY_HEX,
    expected_hash,
    expected_mac,
    line_of,
    read_lines,
    records,
    rehash,
    rotated_set,
    write_day,
    write_lines,
)

import controller.audit.anchors as anchors_mod
import controller.audit.linecheck as linecheck
from controller import audit_cli
from controller.audit import (
    AnchorSink,
    AuditLog,
    AuditLogError,
    KeyFileError,
    load_key,
    open_table_log,
    read_anchors,
    table_files,
    verify_file,
    verify_set,
)
from controller.cli import main
from tests.budget import examples

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class LogSet:
    root: Path
    files: list[Path]
    anchors: Path
    keyed: bool

    @property
    def anchor_list(self):
        return read_anchors(self.anchors)


def _make(base: Path, keyed: bool) -> LogSet:
    anchors = base / "anchors.jsonl"
    files = rotated_set(base / "logs", key=KEY if keyed else None,
                        anchors=AnchorSink(anchors, syslog=False))
    return LogSet(base / "logs", files, anchors, keyed)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, LogSet]:
    return {k: _make(tmp_path_factory.mktemp("keyed" if k else "plain"), k) for k in (False, True)}


def _copy(src: LogSet, base: Path) -> LogSet:
    dest = base / ("keyed" if src.keyed else "plain")
    shutil.copytree(src.root, dest / "logs")
    shutil.copy(src.anchors, dest / "anchors.jsonl")
    files = [dest / "logs" / f.relative_to(src.root) for f in src.files]
    return LogSet(dest / "logs", files, dest / "anchors.jsonl", src.keyed)


@pytest.fixture
def plain(pristine: dict[bool, LogSet], tmp_path: Path) -> LogSet:
    return _copy(pristine[False], tmp_path)


@pytest.fixture
def keyed(pristine: dict[bool, LogSet], tmp_path: Path) -> LogSet:
    return _copy(pristine[True], tmp_path)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "audit.key"
    path.write_text(f"# shoewarden audit key\n{KEY_HEX}\n")
    path.chmod(0o600)
    return path


def first_problem(check):
    (table,) = check.tables
    assert not table.ok
    return table.problems[0]


def _card_line(path: Path, after: int = 5) -> int:
    """1-based line of the first card input after line ``after``."""
    for n, rec in enumerate(records(path), start=1):
        if n > after and rec["kind"] == "input" and rec["event"]["type"] == "card":
            return n
    raise AssertionError("no card input")


# --------------------------------------------------------------------------- the intact set


def test_rotated_set_is_one_chain_across_files(plain: LogSet) -> None:
    assert [f.name for f in plain.files] == [f"T1-{d.isoformat()}.jsonl" for d in DAYS]
    assert table_files(plain.root, "T1") == plain.files
    prev_last = None
    for path in plain.files:
        recs = records(path)
        for before, after in itertools.pairwise(recs):
            assert after["prev"] == before["hash"] and after["seq"] == before["seq"] + 1
        for rec in recs:
            assert rec["hash"] == expected_hash(rec)
        first = recs[0]
        assert first["kind"] == "header"
        if prev_last is None:
            assert (first["seq"], first["prev"]) == (1, GENESIS)
            assert "chain" not in first
        else:  # the first record continues the previous file, and says so
            assert first["prev"] == prev_last["hash"]
            assert first["seq"] == prev_last["seq"] + 1
            assert first["chain"]["continues"] == {
                "file": plain.files[plain.files.index(path) - 1].name,
                "seq": prev_last["seq"], "hash": prev_last["hash"]}
        prev_last = recs[-1]
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert stat.S_IMODE(plain.files[0].parent.stat().st_mode) & 0o007 == 0


def test_intact_set_verifies_with_anchors_and_each_file_alone(plain: LogSet) -> None:
    check = verify_set(plain.files, anchors=plain.anchor_list)
    assert check.ok and check.exit_code == 0
    (table,) = check.tables
    assert table.table == "T1" and len(table.files) == 3
    assert table.anchors_checked >= 6
    last = records(plain.files[-1])[-1]
    assert table.head == (last["seq"], last["hash"])
    for path in plain.files:  # a file of a rotated set verifies on its own too
        assert verify_file(path).ok
    alone = verify_set(plain.files[1:], partial=True)  # knowingly part of the set
    assert alone.ok
    assert any("not given" in n for n in alone.tables[0].notes)
    missing = verify_set(plain.files[1:])  # the oldest file deleted (issue 8)
    assert not missing.ok and missing.exit_code == 1
    assert missing.tables[0].problems[0].kind == "file-missing"
    assert missing.tables[0].problems[0].file == plain.files[0].name


def test_several_tables_are_grouped_by_table(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    a = [write_day(root, d, table="BJ-1", seed=i) for i, d in enumerate(DAYS[:2])]
    b = [write_day(root, d, table="BAC-2", name="gr-banco-punto", seed=i)
         for i, d in enumerate(DAYS[:2])]
    check = verify_set([a[1], b[0], a[0], b[1]])  # any order on the command line
    assert check.ok
    assert sorted(t.table for t in check.tables) == ["BAC-2", "BJ-1"]
    by = {t.table: t for t in check.tables}
    assert [f.path for f in by["BJ-1"].files] == a
    lines = read_lines(b[1])
    lines[3] = lines[3].replace(b'"shoe"', b'"shoo"', 1)
    write_lines(b[1], lines)
    check = verify_set([*a, *b])
    by = {t.table: t for t in check.tables}
    assert by["BJ-1"].ok and not by["BAC-2"].ok
    assert (by["BAC-2"].problems[0].file, by["BAC-2"].problems[0].line) == (str(b[1]), 4)
    assert check.exit_code == 1


# --------------------------------------------------------------------------- the eight tamperings
# Each make_* returns (file, line, kind) where verify must name it.


def make_edit(s: LogSet) -> tuple[Path, int, str]:
    path = s.files[1]
    n = _card_line(path)
    lines = read_lines(path)
    rec = json.loads(lines[n - 1])
    rec["event"]["card"] = "AS" if rec["event"]["card"] != "AS" else "KD"
    lines[n - 1] = line_of(rec)  # content changed, hash not recomputed
    write_lines(path, lines)
    return path, n, "edited"


def make_delete(s: LogSet) -> tuple[Path, int, str]:
    path = s.files[1]
    n = _card_line(path)
    lines = read_lines(path)
    del lines[n - 1]
    write_lines(path, lines)
    return path, n, "deleted"  # the record that now sits at line n follows a gap


def make_insert(s: LogSet) -> tuple[Path, int, str]:
    path = s.files[1]
    n = _card_line(path)
    lines = read_lines(path)
    before = json.loads(lines[n - 2])
    forged = rehash({**json.loads(lines[n - 1]), "prev": before["hash"],
                     "event": {"type": "card", "card": "AS"}})
    lines.insert(n - 1, line_of(forged))  # a self-consistent forgery at line n
    write_lines(path, lines)
    return path, n + 1, "inserted"  # the genuine record after it repeats its seq


def make_reorder(s: LogSet) -> tuple[Path, int, str]:
    path = s.files[1]
    n = _card_line(path)
    lines = read_lines(path)
    lines[n - 1], lines[n] = lines[n], lines[n - 1]
    write_lines(path, lines)
    return path, n, "reordered"


def make_truncate(s: LogSet, which: int = 1, cut: int = 5) -> tuple[Path, int, str]:
    path = s.files[which]
    lines = read_lines(path)
    write_lines(path, lines[:-cut])  # whole records cut off the end: every line still whole
    return path, len(lines) - cut + 1, "truncated"


def make_append(s: LogSet, which: int = 2) -> tuple[Path, int, str]:
    path = s.files[which]
    lines = read_lines(path)
    last = json.loads(lines[-1])
    forged = {k: v for k, v in last.items() if k not in ("hash", "mac")}
    forged.update(seq=last["seq"] + 1, prev=last["hash"], kind="output",
                  output={"type": "note", "kind": "forged", "text": "all fine", "data": {}})
    forged.pop("event", None)
    if "mac" in last:  # the forger has no key: a made-up mac
        forged["mac"] = "0" * 64
    lines.append(line_of(rehash(forged)))
    write_lines(path, lines)
    return path, len(lines), "appended"


def make_leave_out(s: LogSet) -> tuple[Path, int, str]:
    del s.files[1]
    return s.files[1], 1, "file-missing"


def make_torn(s: LogSet) -> tuple[Path, int, str]:
    path = s.files[2]
    lines = read_lines(path)
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    write_lines(path, lines)
    return path, len(lines), "torn"


def test_make_edit(plain: LogSet) -> None:
    original = read_lines(plain.files[1])
    path, n, _ = make_edit(plain)
    now = read_lines(path)
    assert len(now) == len(original)
    assert [i + 1 for i, (a, b) in enumerate(zip(original, now, strict=True)) if a != b] == [n]
    rec = json.loads(now[n - 1])
    assert rec["hash"] != expected_hash(rec)


def test_make_delete(plain: LogSet) -> None:
    original = records(plain.files[1])
    path, n, _ = make_delete(plain)
    now = records(path)
    assert len(now) == len(original) - 1
    assert original[n - 1]["seq"] not in {r["seq"] for r in now}


def test_make_insert(plain: LogSet) -> None:
    original = read_lines(plain.files[1])
    path, n, _ = make_insert(plain)
    now = records(path)
    forged = now[n - 2]
    assert len(now) == len(original) + 1
    assert forged["hash"] == expected_hash(forged)  # self-consistent …
    assert forged["prev"] == now[n - 3]["hash"]  # … and chained to the record before it
    assert now[n - 1]["seq"] == forged["seq"]


def test_make_reorder(plain: LogSet) -> None:
    original = read_lines(plain.files[1])
    path, n, _ = make_reorder(plain)
    now = read_lines(path)
    assert sorted(now) == sorted(original) and now != original
    assert json.loads(now[n - 1])["seq"] == json.loads(now[n])["seq"] + 1


def test_make_truncate(plain: LogSet) -> None:
    original = plain.files[1].read_bytes()
    path, n, _ = make_truncate(plain)
    now = path.read_bytes()
    assert original.startswith(now) and now.endswith(b"\n") and len(now) < len(original)
    assert len(read_lines(path)) == n - 1


def test_make_append(plain: LogSet) -> None:
    original = read_lines(plain.files[2])
    path, n, _ = make_append(plain)
    now = records(path)
    assert len(now) == len(original) + 1 == n
    forged, last = now[-1], now[-2]
    assert forged["hash"] == expected_hash(forged)
    assert (forged["prev"], forged["seq"]) == (last["hash"], last["seq"] + 1)
    # the plain chain alone cannot tell: that is what keys and anchors are for
    assert verify_file(path).ok and verify_set(plain.files).ok


def test_make_leave_out(plain: LogSet) -> None:
    middle = plain.files[1]
    make_leave_out(plain)
    assert middle not in plain.files and len(plain.files) == 2


def test_make_torn(plain: LogSet) -> None:
    original = plain.files[2].read_bytes()
    path, n, _ = make_torn(plain)
    now = path.read_bytes()
    assert original.startswith(now) and not now.endswith(b"\n")
    assert len(read_lines(path)) == n


@pytest.mark.parametrize("tamper", [make_edit, make_delete, make_insert, make_reorder,
                                    make_leave_out, make_torn])
def test_verify_names_the_tampering(plain: LogSet, tamper) -> None:
    path, line, kind = tamper(plain)
    check = verify_set(plain.files)
    assert check.exit_code == 1
    problem = first_problem(check)
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind), problem


@pytest.mark.parametrize("tamper", [make_delete, make_reorder, make_insert])
def test_with_the_key_a_record_moved_or_lost_is_named_as_without_it(keyed: LogSet,
                                                                     tamper) -> None:
    """The link is checked before the MAC: a deletion or reordering breaks the MAC chain
    of the genuine record after it too, and was reported as that record being forged (a
    review). A forged insertion is named at the forgery itself: it links, and its MAC
    fails."""
    path, line, kind = tamper(keyed)
    if tamper is make_insert:
        line, kind = line - 1, "mac"
    check = verify_set(keyed.files, key=KEY)
    problem = first_problem(check)
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind), problem


def test_insertion_detail_names_the_inserted_line(plain: LogSet) -> None:
    _, line, _ = make_insert(plain)
    problem = first_problem(verify_set(plain.files))
    assert f"a record was inserted at line {line - 1}" in problem.detail


def test_reordering_detail_names_where_the_record_went(plain: LogSet) -> None:
    _, line, _ = make_reorder(plain)
    problem = first_problem(verify_set(plain.files))
    assert problem.detail.endswith(f"is further on, at line {line + 1}")


def test_deletion_detail_says_deleted(plain: LogSet) -> None:
    make_delete(plain)
    problem = first_problem(verify_set(plain.files))
    assert "nowhere in the file: record(s) deleted" in problem.detail


def test_truncated_tail_of_a_middle_file_is_found_by_the_next_file(plain: LogSet) -> None:
    path, line, kind = make_truncate(plain, which=1)
    problem = first_problem(verify_set(plain.files))
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind)
    assert "continues it from seq" in problem.reason


def test_truncated_tail_of_the_last_file_is_found_by_the_anchors(plain: LogSet) -> None:
    path, line, kind = make_truncate(plain, which=2)
    assert verify_set(plain.files).ok  # nothing after it to notice
    problem = first_problem(verify_set(plain.files, anchors=plain.anchor_list))
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind)
    assert "anchor" in problem.reason


def test_appended_forgery_in_a_middle_file_is_found_by_the_next_file(plain: LogSet) -> None:
    path, line, kind = make_append(plain, which=1)
    problem = first_problem(verify_set(plain.files))
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind)


def test_appended_forgery_at_the_end_is_found_by_the_anchors(plain: LogSet) -> None:
    path, line, kind = make_append(plain, which=2)
    problem = first_problem(verify_set(plain.files, anchors=plain.anchor_list))
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind)
    assert "closed the file" in problem.reason


def test_appended_forgery_is_found_when_the_open_anchors_name_no_table(plain: LogSet) -> None:
    # a log written to one file (`bench --log FILE.jsonl`) anchors 'open' before the table is
    # known: table null. Grouped by table, those anchors came after the table's own and the
    # 'close' was no longer the file's last: the forgery passed (a review).
    lines = plain.anchors.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sum(r["reason"] == "open" for r in records) >= len(plain.files)
    for r in records:
        if r["reason"] == "open":
            r["table"] = None
    plain.anchors.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert verify_set(plain.files, anchors=plain.anchor_list).ok
    path, line, kind = make_append(plain, which=2)
    problem = first_problem(verify_set(plain.files, anchors=plain.anchor_list))
    assert (problem.file, problem.line, problem.kind) == (str(path), line, kind)
    assert "closed the file" in problem.reason


def test_appended_forgery_is_found_by_the_key(keyed: LogSet) -> None:
    path, line, _ = make_append(keyed, which=2)
    assert verify_set(keyed.files).ok  # without the key the plain chain holds
    problem = first_problem(verify_set(keyed.files, key=KEY))
    assert (problem.file, problem.line, problem.kind) == (str(path), line, "mac")
    assert "appended" in problem.detail


def test_verify_cli_names_file_and_line(plain: LogSet, capsys: pytest.CaptureFixture) -> None:
    path, line, _ = make_edit(plain)
    assert main(["audit", "verify", *map(str, plain.files)]) == 1
    out = capsys.readouterr().out
    assert f"{path}: line {line} (seq " in out and "hash mismatch: record was edited" in out
    assert "FAILED" in out


# --------------------------------------------------------------------------- keys


def _rewrite_recomputing_hashes(s: LogSet, path: Path, n: int) -> None:
    """Edit line n and recompute every plain hash after it, across the later files too."""
    files = s.files[s.files.index(path):]
    prev_hash = None
    prev_file = None
    for f in files:
        recs = records(f)
        out = []
        for i, rec in enumerate(recs, start=1):
            if f == path and i == n:
                rec["event"]["card"] = "AS" if rec["event"]["card"] != "AS" else "KD"
            if prev_hash is not None and (f != path or i > n):
                if i == 1:
                    rec["chain"]["continues"]["hash"] = prev_hash
                    assert rec["chain"]["continues"]["file"] == prev_file
                rec["prev"] = prev_hash
            if f != path or i >= n:
                rec = rehash(rec)
            prev_hash = rec["hash"]
            out.append(line_of(rec))
        write_lines(f, out)
        prev_file = f.name


def test_keyed_log_carries_a_chained_hmac(keyed: LogSet) -> None:
    prev_mac = GENESIS
    for path in keyed.files:
        recs = records(path)
        if path == keyed.files[0]:
            assert recs[0]["chain"]["mac"]["alg"] == "HMAC-SHA-256"
        else:
            assert recs[0]["chain"]["continues"]["mac"] == prev_mac
        for rec in recs:
            assert rec["mac"] == expected_mac(KEY, prev_mac, rec)
            assert rec["hash"] == expected_hash(rec)  # the hash covers the mac
            prev_mac = rec["mac"]
    assert verify_set(keyed.files, key=KEY).ok


def test_rewritten_keyed_log_fails_keyed_verification(keyed: LogSet) -> None:
    path = keyed.files[1]
    n = _card_line(path)
    _rewrite_recomputing_hashes(keyed, path, n)
    plain_check = verify_set(keyed.files)
    assert plain_check.ok  # the plain chain was recomputed: it holds
    problem = first_problem(verify_set(keyed.files, key=KEY))
    assert (problem.file, problem.line, problem.kind) == (str(path), n, "mac")
    assert "mac mismatch" in problem.reason


def test_rewritten_log_fails_against_the_anchors(plain: LogSet) -> None:
    path = plain.files[1]
    n = _card_line(path)
    _rewrite_recomputing_hashes(plain, path, n)
    assert verify_set(plain.files).ok
    problem = first_problem(verify_set(plain.files, anchors=plain.anchor_list))
    assert problem.kind == "rewritten" and problem.file == str(path) and problem.line > n


def test_keyed_log_without_the_key_says_what_was_not_checked(
        keyed: LogSet, capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", "verify", *map(str, keyed.files)]) == 0
    out = capsys.readouterr().out
    total = sum(len(read_lines(f)) for f in keyed.files)
    assert "table T1: ok" in out
    assert f"HMAC chain: NOT checked: {total} record(s) carry a mac" in out
    assert "plain hash chain was checked" in out


def test_keyed_verification_with_the_key_file(keyed: LogSet, key_file: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", "verify", "--key", str(key_file), *map(str, keyed.files)]) == 0
    assert "HMAC chain: checked with the key on every record" in capsys.readouterr().out


def test_wrong_key_is_a_tampered_log(keyed: LogSet, tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    """Issue 8: a log re-signed with someone else's key used to exit 2 ("nothing judged")."""
    other = tmp_path / "other.key"
    other.write_text("ab" * 32)
    other.chmod(0o600)
    assert main(["audit", "verify", "--key", str(other), str(keyed.files[0])]) == 1
    out = capsys.readouterr().out
    assert "wrong key" in out and "re-signed" in out


def test_unkeyed_log_fails_keyed_verification(plain: LogSet, key_file: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    assert main(["audit", "verify", "--key", str(key_file), str(plain.files[0])]) == 1
    assert "line 1 (seq 1): record has no mac" in capsys.readouterr().out


def test_stripping_the_macs_is_caught_by_the_key(keyed: LogSet) -> None:
    path = keyed.files[0]
    out = []
    for rec in records(path):
        rec.pop("mac")
        rec.pop("chain", None)
        out.append(rec)
    prev = GENESIS
    lines = []
    for rec in out:
        rec["prev"] = prev
        rec = rehash(rec)
        prev = rec["hash"]
        lines.append(line_of(rec))
    write_lines(path, lines)
    assert verify_file(path).ok
    result = verify_file(path, key=KEY)
    assert (result.ok, result.first_bad_line, result.problem) == (False, 1, "mac")


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_mac_in_an_unkeyed_log_is_caught_wherever_it_is(plain: LogSet, where: str) -> None:
    """A record given a ``mac`` in a log that declares no MAC chain — the chain rehashed
    after it, so that only rule 6 can catch it — is named, on whichever path checks the
    run it lies in (a long run is checked as a whole, not line by line)."""
    path = plain.files[0]
    recs = records(path)
    n = {"first": 2, "middle": len(recs) // 2, "last": len(recs)}[where]
    assert len(recs) > 300  # several runs of lines, so the mac can be inside one
    prev = recs[n - 2]["hash"] if n > 1 else GENESIS
    lines = [line_of(rec) for rec in recs[:n - 1]]
    for i, rec in enumerate(recs[n - 1:], start=n):
        if i == n:
            rec["mac"] = "ab" * 32
        if i > 1:
            rec["prev"] = prev
        rec = rehash(rec)
        prev = rec["hash"]
        lines.append(line_of(rec))
    write_lines(path, lines)
    for parallel in (False, True):
        result = verify_file(path, parallel=parallel)
        assert (result.ok, result.first_bad_line, result.problem) == (False, n, "mac")
        assert "declares no MAC chain" in (result.reason or "")


def test_key_file_format(tmp_path: Path) -> None:
    good = tmp_path / "k"
    good.write_text(f"# comment\n{KEY_HEX[:32]}\n  {KEY_HEX[32:]}  \n")
    good.chmod(0o600)
    loaded = load_key(good)
    assert loaded.key == KEY and loaded.warning is None and len(loaded.key_id) == 16
    good.chmod(0o644)
    assert "chmod 600" in load_key(good).warning
    for text, why in (("abcd", "at least 32"), ("zz" * 32, "hexadecimal"), ("", "no key")):
        bad = tmp_path / "bad"
        bad.write_text(text)
        with pytest.raises(KeyFileError, match=why):
            load_key(bad)
    with pytest.raises(KeyFileError, match="no such key file"):
        load_key(tmp_path / "missing")


def test_writer_refuses_a_keyed_log_without_its_key_and_the_other_way(keyed: LogSet,
                                                                      plain: LogSet) -> None:
    with pytest.raises(AuditLogError, match="keyed"):
        AuditLog.open(keyed.files[-1])
    with pytest.raises(AuditLogError, match="not keyed"):
        AuditLog.open(plain.files[-1], key=KEY)
    with AuditLog.open(keyed.files[-1], key=KEY) as log:  # with the key it continues
        log.output({"type": "note"}, context={"table": "T1", "shoe": 0, "round": 0,
                                              "state": "closed"})
    assert verify_set(keyed.files, key=KEY).ok


# --------------------------------------------------------------------------- anchors


def test_anchors_at_open_shoe_end_table_close_and_close(plain: LogSet) -> None:
    anchors = plain.anchor_list
    by_file: dict[str, list] = {}
    for a in anchors:
        by_file.setdefault(a.file, []).append(a)
    for path in plain.files:
        recs = records(path)
        hashes = {r["seq"]: r["hash"] for r in recs}
        reasons = [a.reason for a in by_file[path.name]]
        assert reasons[0] == "open" and reasons[-1] == "close"
        assert "table_close" in reasons and "shoe_end" in reasons
        shoe_ends = [r["seq"] for r in recs if r["kind"] == "output"
                     and r["output"].get("to") == "shoe_complete"]
        assert [a.seq for a in by_file[path.name] if a.reason == "shoe_end"] == shoe_ends
        for a in by_file[path.name]:
            assert a.table == "T1" and a.ts.endswith("Z")
            if a.seq in hashes:
                assert hashes[a.seq] == a.hash
        assert by_file[path.name][-1].seq == recs[-1]["seq"]
    raw = json.loads(plain.anchors.read_text().splitlines()[0])
    assert set(raw) == {"table", "file", "seq", "hash", "ts", "reason"}


def test_anchor_goes_to_syslog_when_there_is_one(tmp_path: Path, monkeypatch) -> None:
    sent = []

    class FakeSyslog:
        LOG_USER, LOG_AUTHPRIV, LOG_NOTICE = 8, 80, 5

        @staticmethod
        def syslog(priority, message):
            sent.append((priority, message))

    monkeypatch.setattr(anchors_mod, "_syslog", FakeSyslog)
    sink = AnchorSink(tmp_path / "a.jsonl", syslog=True)
    with AuditLog.open(tmp_path / "x.jsonl", anchors=sink, table="T9"):
        pass
    assert [json.loads(m.split(" ", 1)[1])["reason"] for _, m in sent] == ["open", "close"]
    assert all(p == 80 | 5 and m.startswith("shoewarden-audit-anchor ") for p, m in sent)
    monkeypatch.setattr(anchors_mod, "_syslog", None)  # a platform without syslog
    sink = AnchorSink(tmp_path / "b.jsonl", syslog=True)
    assert not sink.use_syslog
    with AuditLog.open(tmp_path / "y.jsonl", anchors=sink):
        pass
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2


def test_anchor_file_from_syslog_lines_is_read(tmp_path: Path) -> None:
    path = tmp_path / "syslog.txt"
    path.write_text('Nov 21 10:00:00 host shoewarden: shoewarden-audit-anchor {"file":"T1-x.jsonl"'
                    ',"hash":"ab","reason":"open","seq":0,"table":"T1","ts":"t"}\n')
    (a,) = read_anchors(path)
    assert (a.file, a.seq, a.reason) == ("T1-x.jsonl", 0, "open")


# --------------------------------------------------------------------------- the writer refuses


def test_writer_refuses_a_tampered_log(plain: LogSet) -> None:
    path, line, _ = make_edit(plain)
    before = path.read_bytes()
    with pytest.raises(AuditLogError) as info:
        AuditLog.open(path)
    assert info.value.line == line and "chain does not verify" in str(info.value)
    assert path.read_bytes() == before


def test_new_log_with_a_recorded_reason(plain: LogSet) -> None:
    path, line, _ = make_edit(plain)  # the middle day is damaged
    with pytest.raises(AuditLogError):
        open_table_log(plain.root, "T1", DAYS[1])
    reason = f"log damaged (edited at line {line}); inspector informed"
    log = open_table_log(plain.root, "T1", DAYS[1], new_log_reason=reason)
    log.write("note", {"table": "T1"}, text="restart")
    log.close()
    new = Path(log.writer.name)
    assert new.name == "T1-2026-11-20.2.jsonl"
    first = records(new)[0]
    assert (first["seq"], first["prev"]) == (1, GENESIS)
    prev = first["chain"]["new_chain"]["previous"]
    assert first["chain"]["new_chain"]["reason"] == reason
    good = records(path)[line - 2]
    assert (prev["file"], prev["seq"], prev["hash"]) == (path.name, good["seq"], good["hash"])
    assert f"line {line}" in prev["problem"]
    check = verify_set([plain.files[0], path, new])
    assert any("starts a new chain" in n and reason in n for n in check.tables[0].notes)


def test_next_day_refuses_to_follow_a_broken_day(plain: LogSet) -> None:
    make_torn(plain)
    with pytest.raises(AuditLogError, match="previous log does not verify"):
        open_table_log(plain.root, "T1", dt.date(2026, 11, 22))
    log = open_table_log(plain.root, "T1", dt.date(2026, 11, 22),
                         new_log_reason="previous day torn; not recovered")
    log.write("note", {"table": "T1"}, text="new day")
    log.close()
    first = records(Path(log.writer.name))[0]
    assert first["chain"]["new_chain"]["reason"] == "previous day torn; not recovered"
    assert first["chain"]["new_chain"]["previous"]["file"] == plain.files[2].name


# --------------------------------------------------------------------------- exit codes


def test_exit_codes_and_no_traceback(plain: LogSet, tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "controller", "audit", "verify", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    ok = run(*map(str, plain.files))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    missing = run(str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\xff\xfe not a log\n{}\n")
    bad = run(str(garbage))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr + bad.stdout
    badkey = run("--key", str(tmp_path / "nokey"), str(plain.files[0]))
    assert badkey.returncode == 2 and "no such key file" in badkey.stderr
    badanchors = tmp_path / "anchors.txt"
    badanchors.write_text("not json\n")
    r = run("--anchors", str(badanchors), str(plain.files[0]))
    assert r.returncode == 2 and "line 1" in r.stderr
    for r in (ok, missing, bad, badkey):
        assert "Traceback" not in r.stderr


def test_json_output(plain: LogSet, capsys: pytest.CaptureFixture) -> None:
    make_delete(plain)
    assert main(["audit", "verify", "--json", *map(str, plain.files)]) == 1
    out = json.loads(capsys.readouterr().out)
    (table,) = out["tables"]
    assert out["ok"] is False and table["problems"][0]["kind"] == "deleted"


def test_files_are_created_0640_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o000)
    try:
        path = write_day(tmp_path, DAYS[0])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


# --------------------------------------------------------------------------- the document

DOC = ROOT / "docs" / "audit-log.md"


@pytest.fixture
def doc_script(tmp_path: Path) -> Path:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "verify_audit_log.py"
    path.write_text(block, encoding="utf-8")
    return path


def _script(script: Path, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(script), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_doc_script_verifies_rotated_and_keyed_sets(doc_script: Path, plain: LogSet,
                                                    keyed: LogSet, key_file: Path) -> None:
    total = sum(len(read_lines(f)) for f in plain.files)
    head = records(plain.files[-1])[-1]["hash"]
    ok = _script(doc_script, *plain.files)
    assert ok.returncode == 0 and f"ok, {total} records, head {head}" in ok.stdout
    assert _script(doc_script, *plain.files[1:]).returncode == 0  # starts mid-chain
    assert _script(doc_script, plain.files[0], plain.files[2]).returncode == 1  # left out
    assert _script(doc_script, "--key", key_file, *keyed.files).returncode == 0
    assert _script(doc_script, "--key", key_file, *plain.files).returncode == 1
    _rewrite_recomputing_hashes(keyed, keyed.files[1], _card_line(keyed.files[1]))
    assert _script(doc_script, *keyed.files).returncode == 0  # the plain chain holds
    bad = _script(doc_script, "--key", key_file, *keyed.files)
    assert bad.returncode == 1 and "mac missing or wrong" in bad.stdout


@pytest.mark.parametrize("tamper", [make_edit, make_delete, make_insert, make_reorder, make_torn])
def test_doc_script_names_the_file_and_line(doc_script: Path, plain: LogSet, tamper) -> None:
    path, line, _ = tamper(plain)
    proc = _script(doc_script, *plain.files)
    assert proc.returncode == 1 and f"{path}: line {line}:" in proc.stdout


def test_doc_covers_keys_anchors_rotation_recovery() -> None:
    text = DOC.read_text(encoding="utf-8")
    for needle in ("HMAC-SHA-256(key, previous_mac + canonical(record minus \"hash\" and \"mac\"))",
                   "at least 32", "key_id", '"continues"', '"new_chain"', "new_log_reason",
                   '"reason":"shoe_end"', "syslog", "table_close", "torn last line",
                   '"cut": {"line", "offset"', "restored_outputs", "shoewarden audit replay",
                   "shoewarden audit report", "--round N", "self-contained", "SABOT_ROTATION",
                   "<table>-<YYYY-MM-DD>.jsonl", "0640"):
        assert needle in text, needle


@pytest.mark.parametrize("where", ["middle", "last"])
def test_keys_out_of_order_are_not_canonical_even_where_the_float_screen_marks_them(
        tmp_path: Path, where: str) -> None:
    """The fast paths mark '.', 'E', '+', '-' before their canonical check: "x-" sorts
    before "x0" but its marked form after. A record written "x0", then "x-" (not canonical)
    with its hash and the chain recomputed must still fail, as the docs' reference script
    fails it; the same keys in canonical order pass."""
    path = write_day(tmp_path, DAYS[0])
    lines = read_lines(path)
    n = {"middle": len(lines) // 2, "last": len(lines) - 1}[where]

    def with_extra(text: bytes) -> list[bytes]:
        out = list(lines)
        rec = json.loads(out[n])
        body = line_of(rehash(rec))[:-2] + b"," + text + b"}"  # (keys sort before "x")
        rec = json.loads(body)
        unhashed = body.replace(b'"hash":"' + rec["hash"].encode() + b'",', b"")
        digest = hashlib.sha256(unhashed).hexdigest()
        out[n] = body.replace(rec["hash"].encode(), digest.encode()) + b"\n"
        prev = digest
        for i in range(n + 1, len(out)):  # rechained after it
            later = json.loads(out[i])
            later["prev"] = prev
            later = rehash(later)
            prev = later["hash"]
            out[i] = line_of(later)
        return out

    write_lines(path, with_extra(b'"x-":2,"x0":1'))  # canonical: '-' sorts before '0'
    assert verify_file(path).ok
    write_lines(path, with_extra(b'"x0":1,"x-":2'))
    result = verify_file(path)
    assert not result.ok and result.first_bad_line == n + 1
    assert "canonical" in (result.reason or "")


_KEY_TEXT = st.text(alphabet='ab0?-.E+:"\\\n', max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(0, 99) | _KEY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY_TEXT, inner, max_size=3),
    max_leaves=8)


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(_KEY_TEXT, _JSON, max_size=4))
def test_a_marked_character_in_a_key_is_found_whatever_the_escapes(record: dict) -> None:
    """The float screen's key test (the quick search for a text without escapes, the
    general pass for one with them) against its definition: some key, at any depth, holds a
    ``?`` once '.', 'E', '+' and '-' are marked."""
    marked = orjson.dumps(record, option=orjson.OPT_SORT_KEYS).translate(linecheck._MARKED)

    def keys(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield k
                yield from keys(v)
        elif isinstance(value, list):
            for v in value:
                yield from keys(v)

    expected = any("?" in k for k in keys(orjson.loads(marked)))
    assert linecheck._mark_in_key(marked) is expected
    assert linecheck._mark_in_key(bytearray(marked)) is expected


def test_a_log_too_big_to_read_is_one_line_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a forged line of gigabytes: readlines ran out of memory and verify printed a
    # MemoryError traceback (a review); the memory is the host's, so the reading fails here
    log = tmp_path / "log.jsonl"
    log.write_text("{}\n", encoding="utf-8")

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(audit_cli, "verify_set", out_of_memory)
    assert main(["audit", "verify", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too long to read in memory" in err


@pytest.mark.parametrize("command", ["verify", "report", "replay"])
def test_the_wrong_file_is_said_to_be_the_wrong_file(
        plain: LogSet, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: str) -> None:
    """A directory, an empty file, an input stream given instead of its log: verify called
    a directory 'no such file', an input stream only '[edited]', and an empty file 'ok: 0
    record(s) verified' (an auditors' review). verify keeps the chain's verdict — a file
    with no record fails (exit 1) and one whose lines are no records is edited, with a
    note saying what it looks like — and report and replay refuse such a file (exit 2)."""
    stream = tmp_path / "stream.jsonl"
    stream.write_text('{"type": "table_open", "table": "T1", "decks": 6}\n'
                      '{"type": "deck_check", "cards": []}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    verify = command == "verify"
    cases = {tmp_path: (2, "a directory, not a log file" if verify
                        else f"{tmp_path}: a directory"),
             empty: (1, "empty: the file holds no record") if verify
             else (2, f"{empty}: empty: it holds no record"),
             stream: (1, "note: stream.jsonl: not an audit log: its lines are JSON objects "
                         "with no seq, hash or kind") if verify
             else (2, f"{stream}: not an audit log")}
    for path, (code, why) in cases.items():
        assert main(["audit", command, "--no-progress", str(path)]) == code, path
        out = capsys.readouterr()
        assert why in out.out + out.err, out


def test_records_stripped_of_their_fields_are_still_an_edited_log(
        plain: LogSet, capsys: pytest.CaptureFixture[str]) -> None:
    """A review: with the first two records' seq, hash and kind deleted, verify said 'not an
    audit log' (exit 2, a wrong file) where the file is a log that was edited (exit 1)."""
    path = plain.files[0]
    lines = read_lines(path)
    for i in (0, 1):
        r = json.loads(lines[i])
        for k in ("seq", "hash", "kind"):
            r.pop(k, None)
        lines[i] = line_of(r)
    write_lines(path, lines)
    assert main(["audit", "verify", *map(str, plain.files)]) == 1
    out = capsys.readouterr().out
    assert "[edited]" in out and "not an audit log" not in out
    # a day file emptied is a chain cut, not a wrong file
    path.write_bytes(b"")
    assert main(["audit", "verify", *map(str, plain.files)]) == 1
    assert "empty: the file holds no record" in capsys.readouterr().out


def test_line_endings_converted_to_crlf_are_named(plain: LogSet,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = plain.files[0]
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert main(["audit", "verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "line 1 (seq 1): line is not in canonical form" in out
    assert "it ends in CR LF where the table writes LF" in out


def test_a_line_too_long_for_an_input_event_is_left_to_the_chain_check(tmp_path: Path) -> None:
    """The wrong-file check reads a line up to 1 MiB: a forged line of gigabytes is not
    read whole there (report, replay and recover call it before anything else)."""
    from controller.audit.sets import not_a_log

    path = tmp_path / "long.jsonl"
    path.write_text('{"type": "card", "pad": "' + "x" * (2 << 20) + '"}\n')
    assert not_a_log(path) is None
    path.write_text('{"type": "card", "pad": "' + "x" * 100 + '"}\n')
    assert not_a_log(path) is not None


def test_two_logs_of_one_table_written_to_named_files_are_two_logs(tmp_path: Path) -> None:
    # a review: two bench days with `--log y.jsonl` and `--log z.jsonl` in one directory
    # were one rotated set, z "a new chain without a recorded reason": genuine logs called
    # tampered. Only files named as day files (<table>-<date>.jsonl) form a chain.
    for name in ("y", "z"):
        log = AuditLog.open(tmp_path / f"{name}.jsonl", durability="none", table="T1")
        log.write("note", {"table": "T1"}, text="a day")
        log.close()
    check = verify_set([tmp_path / "y.jsonl", tmp_path / "z.jsonl"])
    assert check.ok, [t.problems for t in check.tables]
    assert len(check.tables) == 2 and all(t.table.startswith("T1 (") for t in check.tables)


def test_a_day_file_renamed_is_still_in_its_chain(plain: LogSet) -> None:
    # a review of the grouping above: a set whose last day was renamed '.orig' failed ("the
    # file before it is missing", though it was given), and with --partial an earlier day
    # rewritten passed: a file that continues one given, or is continued, is in the chain
    last = plain.files[-1]
    renamed = last.with_name(last.name + ".orig")
    last.rename(renamed)
    files = [*plain.files[:-1], renamed]
    check = verify_set(files)
    assert check.ok and len(check.tables) == 1, [t.problems for t in check.tables]
    lines = read_lines(plain.files[0])  # the first day's last record edited, then resealed
    rec = json.loads(lines[-1])
    rec["output" if "output" in rec else "event"] = {"type": "note", "text": "forged"}
    lines[-1] = line_of(rehash(rec))
    write_lines(plain.files[0], lines)
    second = plain.files[1].rename(plain.files[1].with_name("copy-of-day-2.jsonl"))
    problem = first_problem(verify_set([plain.files[0], second], partial=True))
    assert problem.kind == "rewritten" and problem.file == str(second), problem


def test_two_files_whose_contents_were_swapped_are_named_so(plain: LogSet) -> None:
    first, second = plain.files[0], plain.files[1]
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    problem = first_problem(verify_set(plain.files))
    assert (problem.file, problem.line, problem.kind) == (str(first), 1, "reordered")
    assert "continues itself" in problem.reason and "renamed" in (problem.detail or "")
    assert "not given" not in problem.reason


def test_verification_puts_the_collector_back_as_it_was(plain: LogSet) -> None:
    # verify runs with the cyclic collector off (its records hold no cycles: speed) and
    # leaves it as it found it, on or off, whatever the result
    import gc

    path = plain.files[0]
    assert gc.isenabled()
    assert verify_file(path).ok and gc.isenabled()
    gc.disable()
    try:
        assert verify_file(path).ok and not gc.isenabled()
    finally:
        gc.enable()
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], *lines[4:]]))
    assert not verify_file(path).ok and gc.isenabled()
