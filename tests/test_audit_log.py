"""The hash-chained audit log: format, chain, tampering, threads, durability, reopening, docs.

Expected hashes are computed here independently with hashlib + json, never
with the code under test.
"""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import structlog

from controller.audit import (
    GENESIS,
    AuditLog,
    AuditLogError,
    HashChainWriter,
    record_hash,
    seal,
    verify_file,
    verify_lines,
)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "audit-log.md"
AUDIT_PKG = ROOT / "controller" / "audit"

T0 = dt.datetime(2026, 11, 21, 10, 15, 30, 123456, tzinfo=dt.UTC)
SOFTWARE = {"name": "shoewarden", "version": "0.1.0"}
CTX = {"table": "BJ-3", "shoe": 1, "round": 1, "state": "dealing"}


# --------------------------------------------------------------------------- helpers


class FixedClock:
    """T0, then +250 ms per call."""

    def __init__(self, start: dt.datetime = T0, step_ms: int = 250) -> None:
        self.now = start
        self.step = dt.timedelta(milliseconds=step_ms)
        self.calls = 0

    def __call__(self) -> dt.datetime:
        value = self.now
        self.now += self.step
        self.calls += 1
        return value


def canon(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def expected_hash(record: dict) -> str:
    return hashlib.sha256(canon({k: v for k, v in record.items() if k != "hash"})).hexdigest()


def rehash(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k != "hash"}
    out["hash"] = expected_hash(out)
    return out


def line_of(record: dict) -> bytes:
    return canon(record) + b"\n"


def write_sample(path: Path, rounds: int = 3, **open_kw) -> list[dict]:
    """Header + (input, output) per round: 1 + 2*rounds records; returns the written records."""
    open_kw.setdefault("clock", FixedClock())
    written = []
    with AuditLog.open(path, **open_kw) as log:
        written.append(
            log.header(
                software=SOFTWARE,
                table="BJ-3",
                profile={"name": "gr-blackjack", "decks": {"count": 6}},
                settings={"durability": open_kw.get("durability", "input")},
            )
        )
        for r in range(1, rounds + 1):
            ctx = {**CTX, "round": r}
            written.append(log.input({"type": "card", "card": "QH"}, line=10 + r, context=ctx))
            written.append(log.output({"type": "prompt", "text": f"round {r}"}, context=ctx))
    return written


def read_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "table.log"


@pytest.fixture
def sample(log_path: Path) -> Path:
    """A good 7-record log: header, then input/output for rounds 1..3."""
    write_sample(log_path)
    return log_path


# --------------------------------------------------------------------------- format and chain


def test_records_form_a_chain_checked_independently(log_path: Path) -> None:
    returned = write_sample(log_path)
    raw = read_lines(log_path)
    assert len(raw) == 7
    records = [json.loads(line) for line in raw]

    assert [r["seq"] for r in records] == list(range(1, 8))
    assert [r["kind"] for r in records] == ["header"] + ["input", "output"] * 3
    assert records[0]["prev"] == "0" * 64
    for before, after in itertools.pairwise(records):
        assert after["prev"] == before["hash"]
    for line, record in zip(raw, records, strict=True):
        assert re.fullmatch(r"[0-9a-f]{64}", record["hash"])
        assert record["hash"] == expected_hash(record)
        # the line is exactly the canonical encoding of the full record
        assert line == line_of(record)
    assert returned == records

    # writer time stamps: UTC, milliseconds, Z, from the injected clock
    assert [r["ts"] for r in records[:3]] == [
        "2026-11-21T10:15:30.123Z",
        "2026-11-21T10:15:30.373Z",
        "2026-11-21T10:15:30.623Z",
    ]

    header, first_input, first_output = records[:3]
    assert header["software"] == SOFTWARE
    assert header["table"] == "BJ-3"
    assert header["profile"] == {"name": "gr-blackjack", "decks": {"count": 6}}
    assert header["settings"] == {"durability": "input"}
    assert (header["shoe"], header["round"], header["state"]) == (None, None, None)
    assert first_input["event"] == {"type": "card", "card": "QH"}
    assert first_input["line"] == 11
    assert {k: first_input[k] for k in CTX} == CTX
    assert first_output["output"] == {"type": "prompt", "text": "round 1"}
    assert "line" not in first_output

    result = verify_file(log_path)
    assert result.ok, result
    assert (result.records, result.first_bad_seq, result.first_bad_line, result.reason) == (
        7,
        None,
        None,
        None,
    )
    assert result.head == records[-1]["hash"]


def test_head_tracks_last_record(log_path: Path) -> None:
    with AuditLog.open(log_path, clock=FixedClock()) as log:
        assert log.head == (0, "0" * 64)
        rec = log.output({"type": "note"}, context=CTX)
        assert log.head == (1, rec["hash"])
        rec2 = log.write("anchor", {}, head=rec["hash"])
        assert log.head == (2, rec2["hash"])
    assert rec2["kind"] == "anchor"
    assert (rec2["table"], rec2["shoe"], rec2["round"], rec2["state"]) == (None,) * 4
    assert json.loads(read_lines(log_path)[1])["head"] == rec["hash"]


def test_input_without_source_line_and_unusual_payload_keys(log_path: Path) -> None:
    with AuditLog.open(log_path, clock=FixedClock()) as log:
        rec = log.input({"type": "bets_closed"}, line=None, context=CTX)
        # "event" and "method_name" are ordinary fields, not structlog arguments
        rec2 = log.write("custom", CTX, event=None, method_name="x")
    assert "line" not in rec
    assert rec2["event"] is None and rec2["method_name"] == "x"
    assert verify_file(log_path).ok


def test_canonical_helpers_match_independent_computation() -> None:
    body = {"seq": 1, "ts": "2026-11-21T10:15:30.123Z", "kind": "output", "output": {"é": "Δ"}}
    sealed = seal(body, GENESIS)
    assert GENESIS == "0" * 64
    assert sealed["prev"] == GENESIS
    assert sealed["hash"] == expected_hash(sealed)
    assert record_hash({k: v for k, v in sealed.items() if k != "hash"}) == sealed["hash"]
    with pytest.raises(ValueError, match="without its 'hash'"):
        record_hash(sealed)


def test_non_ascii_is_written_as_utf8_not_escaped(log_path: Path) -> None:
    with AuditLog.open(log_path, clock=FixedClock()) as log:
        log.output({"type": "prompt", "text": "Δεύτερο φύλλο\t"}, context=CTX)
    data = log_path.read_bytes()
    assert "Δεύτερο φύλλο".encode() in data
    assert b"\\t" in data and b"\\u0394" not in data
    assert verify_file(log_path).ok


def test_timestamps_are_converted_to_utc_and_truncated_to_ms(log_path: Path) -> None:
    athens = dt.timezone(dt.timedelta(hours=2))
    clock = FixedClock(dt.datetime(2026, 11, 21, 12, 0, 0, 999999, tzinfo=athens))
    with AuditLog.open(log_path, clock=clock) as log:
        rec = log.output({"type": "note"}, context=CTX)
    assert rec["ts"] == "2026-11-21T10:00:00.999Z"
    with (
        AuditLog.to_stream(io.StringIO(), clock=lambda: dt.datetime(2026, 1, 1)) as log,
        pytest.raises(ValueError, match="naive"),
    ):
        log.output({"type": "note"}, context=CTX)


def test_default_clock_is_utc_now(log_path: Path) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    with AuditLog.open(log_path) as log:
        rec = log.output({"type": "note"}, context=CTX)
    after = dt.datetime.now(dt.UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["ts"])
    stamp = dt.datetime.strptime(rec["ts"], "%Y-%m-%dT%H:%M:%S.%f%z")
    assert before <= stamp <= after


def test_empty_log_verifies(log_path: Path) -> None:
    AuditLog.open(log_path).close()
    assert log_path.read_bytes() == b""
    result = verify_file(log_path)
    assert result.ok and result.records == 0 and result.head == GENESIS


# --------------------------------------------------------------------------- tampering


def test_edited_record_fails_at_that_record(sample: Path) -> None:
    lines = read_lines(sample)
    assert b'"text":"round 1"' in lines[2]
    lines[2] = lines[2].replace(b'"text":"round 1"', b'"text":"round 9"')
    write_lines(sample, lines)
    result = verify_file(sample)
    assert not result.ok
    assert (result.first_bad_seq, result.first_bad_line) == (3, 3)
    assert result.reason == "hash mismatch: record was edited"
    assert result.records == 2


def test_edited_and_rehashed_record_fails_at_the_next_one(sample: Path) -> None:
    lines = read_lines(sample)
    forged = json.loads(lines[3])
    forged["event"]["card"] = "AS"
    lines[3] = line_of(rehash(forged))
    write_lines(sample, lines)
    result = verify_file(sample)
    assert not result.ok
    assert (result.first_bad_seq, result.first_bad_line) == (5, 5)
    assert result.reason.startswith("prev does not match the previous record's hash")


def test_deleted_record_fails_at_the_record_after_it(sample: Path) -> None:
    lines = read_lines(sample)
    del lines[3]  # seq 4
    write_lines(sample, lines)
    result = verify_file(sample)
    assert not result.ok
    assert (result.first_bad_seq, result.first_bad_line) == (5, 4)
    assert result.reason.startswith("seq 5 follows seq 3: record(s) missing")


def test_deleted_first_record_is_detected(sample: Path) -> None:
    write_lines(sample, read_lines(sample)[1:])
    result = verify_file(sample)
    assert (result.ok, result.first_bad_seq, result.first_bad_line) == (False, 2, 1)
    assert "first record has seq 2, expected 1" in result.reason


def test_reordered_records_fail_at_the_first_moved_one(sample: Path) -> None:
    lines = read_lines(sample)
    lines[3], lines[4] = lines[4], lines[3]  # seq 4 and 5 swapped
    write_lines(sample, lines)
    result = verify_file(sample)
    assert not result.ok
    assert (result.first_bad_seq, result.first_bad_line) == (5, 4)
    assert result.reason.startswith("seq 5 follows seq 3")


def test_inserted_forged_record_is_detected(sample: Path) -> None:
    lines = read_lines(sample)
    third = json.loads(lines[2])
    # a well-formed forgery: right seq, right prev, correct hash of itself
    forged = rehash({**third, "seq": 4, "prev": third["hash"], "output": {"type": "forged"}})
    write_lines(sample, [*lines[:3], line_of(forged), *lines[3:]])
    result = verify_file(sample)
    assert not result.ok
    # the forgery itself is self-consistent; the original seq 4 after it is not
    assert (result.first_bad_seq, result.first_bad_line) == (4, 5)
    assert result.reason == "seq 4 follows seq 4: record repeated or out of order"


def test_inserted_record_with_bad_hash_fails_at_itself(sample: Path) -> None:
    lines = read_lines(sample)
    third = json.loads(lines[2])
    forged = {**third, "seq": 4, "prev": third["hash"], "output": {"type": "forged"}}
    write_lines(sample, [*lines[:3], line_of(forged), *lines[3:]])
    result = verify_file(sample)
    assert (result.ok, result.first_bad_seq, result.first_bad_line) == (False, 4, 4)
    assert result.reason == "hash mismatch: record was edited"


def test_prev_mismatch_with_right_seq_is_reported_as_such(sample: Path) -> None:
    lines = read_lines(sample)
    rec = json.loads(lines[4])
    lines[4] = line_of(rehash({**rec, "prev": "f" * 64}))
    write_lines(sample, lines)
    result = verify_file(sample)
    assert (result.first_bad_seq, result.first_bad_line) == (5, 5)
    assert result.reason == (
        "prev does not match the previous record's hash: "
        "a record was deleted, inserted or reordered before this one"
    )


@pytest.mark.parametrize("cut", [1, 5, 40])
def test_truncated_last_line_is_torn(sample: Path, cut: int) -> None:
    data = sample.read_bytes()
    sample.write_bytes(data[:-cut])
    result = verify_file(sample)
    assert not result.ok
    assert result.first_bad_line == 7
    assert result.reason.startswith("torn last line")
    assert result.records == 6
    if cut == 1:  # only the newline is missing: the record still parses
        assert result.first_bad_seq == 7


def test_last_line_cut_inside_a_character_is_torn(sample: Path) -> None:
    with AuditLog.open(sample) as log:
        log.output({"type": "prompt", "text": "Δ" * 20}, context=CTX)
    data = sample.read_bytes()
    cut = data.rindex("Δ".encode()) + 1  # between the two bytes of the last Δ
    sample.write_bytes(data[:cut])
    result = verify_file(sample)
    assert (result.ok, result.first_bad_line, result.records) == (False, 8, 7)
    assert result.reason.startswith("torn last line")


def test_invalid_utf8_in_a_complete_line(sample: Path) -> None:
    lines = read_lines(sample)
    lines[1] = lines[1].replace(b"QH", b"Q\xff")
    write_lines(sample, lines)
    result = verify_file(sample)
    assert (result.first_bad_line, result.first_bad_seq) == (2, None)
    assert "not valid UTF-8" in result.reason


def test_unparseable_last_line_with_newline_is_torn(sample: Path) -> None:
    data = sample.read_bytes()
    sample.write_bytes(data[:-30] + b"\n")
    result = verify_file(sample)
    assert (result.ok, result.first_bad_line, result.first_bad_seq) == (False, 7, None)
    assert result.reason.startswith("torn last line: does not parse as JSON")


def test_garbage_line_in_the_middle(sample: Path) -> None:
    lines = read_lines(sample)
    lines[2] = b"not json\n"
    write_lines(sample, lines)
    result = verify_file(sample)
    assert (result.first_bad_line, result.first_bad_seq) == (3, None)
    assert result.reason.startswith("line does not parse as JSON")


def test_reformatted_line_is_not_canonical(sample: Path) -> None:
    lines = read_lines(sample)
    lines[1] = json.dumps(json.loads(lines[1]), sort_keys=True).encode() + b"\n"  # spaces
    write_lines(sample, lines)
    result = verify_file(sample)
    assert (result.first_bad_line, result.first_bad_seq) == (2, 2)
    assert "canonical form" in result.reason


def test_float_in_a_line_is_rejected_by_the_verifier(sample: Path) -> None:
    lines = read_lines(sample)
    rec = json.loads(lines[2])
    rec["output"]["amount"] = 1.5
    lines[2] = line_of(rehash(rec))
    write_lines(sample, lines)
    result = verify_file(sample)
    assert result.first_bad_line == 3
    assert "float" in result.reason


def test_verify_lines_matches_verify_file(sample: Path) -> None:
    lines = read_lines(sample)
    del lines[5]
    write_lines(sample, lines)
    text_lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
    from_lines = verify_lines(text_lines, source=str(sample))
    from_file = verify_file(sample)
    assert from_lines == from_file
    assert not from_lines.ok and from_lines.first_bad_line == 6


# --------------------------------------------------------------------------- threads


def test_threads_keep_the_chain_unbroken(log_path: Path) -> None:
    n_threads, per_thread = 8, 2000
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        with AuditLog.open(log_path) as log:
            barrier = threading.Barrier(n_threads)
            errors: list[BaseException] = []

            def work(tid: int) -> None:
                try:
                    barrier.wait()
                    for i in range(per_thread):
                        log.output({"type": "note", "thread": tid, "i": i}, context=CTX)
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []

    lines = read_lines(log_path)
    assert len(lines) == n_threads * per_thread
    records = [json.loads(line) for line in lines]
    assert [r["seq"] for r in records] == list(range(1, 16001))
    prev = "0" * 64
    for r in records:
        assert r["prev"] == prev
        prev = r["hash"]
    # every thread's records are all there, in the order it wrote them
    for tid in range(n_threads):
        assert [r["output"]["i"] for r in records if r["output"]["thread"] == tid] == list(
            range(per_thread)
        )
    result = verify_file(log_path)
    assert result.ok and result.records == 16000


# --------------------------------------------------------------------------- durability


def test_default_policy_fsyncs_after_inputs_and_headers(log_path: Path, mocker) -> None:
    with AuditLog.open(log_path, clock=FixedClock()) as log:
        lines_at_fsync: list[int] = []
        fsync = mocker.patch(
            "os.fsync", side_effect=lambda fd: lines_at_fsync.append(len(read_lines(log_path)))
        )
        log.header(software=SOFTWARE, table="BJ-3", profile={}, settings={})
        assert fsync.call_count == 1
        log.input({"type": "card", "card": "QH"}, line=1, context=CTX)
        assert fsync.call_count == 2
        log.output({"type": "prompt"}, context=CTX)
        log.output({"type": "prompt"}, context=CTX)
        assert fsync.call_count == 2
        log.input({"type": "card", "card": "AS"}, line=2, context=CTX)
        assert fsync.call_count == 3
        # write-ahead: each fsync ran after its record was written
        assert lines_at_fsync == [1, 2, 5]
        assert isinstance(fsync.call_args.args[0], int)
    assert fsync.call_count == 4  # close() syncs


def test_every_policy_fsyncs_after_every_record(log_path: Path, mocker) -> None:
    with AuditLog.open(log_path, durability="every", clock=FixedClock()) as log:
        fsync = mocker.patch("os.fsync")
        log.output({"type": "prompt"}, context=CTX)
        log.output({"type": "prompt"}, context=CTX)
        log.input({"type": "card", "card": "QH"}, line=1, context=CTX)
        log.write("anchor", {})
        assert fsync.call_count == 4


def test_none_policy_never_fsyncs(log_path: Path, mocker) -> None:
    fsync = mocker.patch("os.fsync")
    with AuditLog.open(log_path, durability="none", clock=FixedClock()) as log:
        log.header(software=SOFTWARE, table="BJ-3", profile={}, settings={})
        log.input({"type": "card", "card": "QH"}, line=1, context=CTX)
        log.output({"type": "prompt"}, context=CTX)
        assert len(read_lines(log_path)) == 3  # still written through at once
    fsync.assert_not_called()
    log.sync()  # closed: a no-op
    fsync.assert_not_called()


def test_explicit_sync_fsyncs_under_any_policy(log_path: Path, mocker) -> None:
    with AuditLog.open(log_path, durability="none") as log:
        fsync = mocker.patch("os.fsync")
        log.sync()
        assert fsync.call_count == 1


def test_stream_log_never_fsyncs_and_verifies(mocker) -> None:
    fsync = mocker.patch("os.fsync")
    stream = io.StringIO()
    log = AuditLog.to_stream(stream, clock=FixedClock())
    log.header(software=SOFTWARE, table=None, profile={}, settings={})
    log.input({"type": "card", "card": "QH"}, line=1, context=CTX)
    log.close()
    fsync.assert_not_called()
    lines = stream.getvalue().splitlines(keepends=True)
    assert len(lines) == 2
    assert json.loads(lines[0])["table"] is None
    assert verify_lines(lines).ok


@pytest.mark.parametrize("bad", ["always", "", "INPUT", None])
def test_bad_durability_policy_is_rejected(log_path: Path, bad) -> None:
    with pytest.raises(ValueError) as info:
        AuditLog.open(log_path, durability=bad)
    message = str(info.value)
    for allowed in ("'input'", "'every'", "'none'"):
        assert allowed in message
    assert not log_path.exists()
    with pytest.raises(ValueError, match="'input', 'every', 'none'"):
        HashChainWriter.open(log_path, durability=bad)
    assert not log_path.exists()


def test_failed_fsync_makes_the_log_unusable(log_path: Path, mocker) -> None:
    log = AuditLog.open(log_path, clock=FixedClock())
    log.output({"type": "prompt"}, context=CTX)
    mocker.patch("os.fsync", side_effect=OSError(5, "Input/output error"))
    with pytest.raises(AuditLogError, match="fsync failed at seq 2"):
        log.input({"type": "card", "card": "QH"}, line=1, context=CTX)
    mocker.stopall()
    with pytest.raises(AuditLogError, match="unusable"):
        log.output({"type": "prompt"}, context=CTX)
    log.close()


def test_writing_after_close_raises(log_path: Path) -> None:
    log = AuditLog.open(log_path)
    log.close()
    log.close()  # idempotent
    with pytest.raises(AuditLogError, match="closed"):
        log.output({"type": "prompt"}, context=CTX)


# --------------------------------------------------------------------------- reopening


def test_reopening_continues_the_chain(sample: Path) -> None:
    last = json.loads(read_lines(sample)[-1])
    with AuditLog.open(sample, clock=FixedClock()) as log:
        assert log.head == (7, last["hash"])
        rec = log.input({"type": "card", "card": "AS"}, line=99, context=CTX)
        log.output({"type": "prompt"}, context=CTX)
    assert rec["seq"] == 8 and rec["prev"] == last["hash"]
    records = [json.loads(line) for line in read_lines(sample)]
    assert [r["seq"] for r in records] == list(range(1, 10))
    result = verify_file(sample)
    assert result.ok and result.records == 9


def test_reopening_an_empty_file_starts_at_genesis(log_path: Path) -> None:
    log_path.touch()
    with AuditLog.open(log_path) as log:
        rec = log.output({"type": "prompt"}, context=CTX)
    assert (rec["seq"], rec["prev"]) == (1, GENESIS)


@pytest.mark.parametrize("cut", [1, 25])
def test_reopening_a_torn_log_raises_with_path_and_line(sample: Path, cut: int) -> None:
    sample.write_bytes(sample.read_bytes()[:-cut])
    before = sample.read_bytes()
    with pytest.raises(AuditLogError) as info:
        AuditLog.open(sample)
    assert info.value.path == str(sample)
    assert info.value.line == 7
    assert str(sample) in str(info.value) and "line 7" in str(info.value)
    assert "torn" in str(info.value)
    assert sample.read_bytes() == before  # nothing appended


def test_reopening_with_unparseable_last_line_raises(sample: Path) -> None:
    sample.write_bytes(sample.read_bytes() + b'{"seq": 8, "hash\n')
    with pytest.raises(AuditLogError, match=r"line 8: last record does not parse") as info:
        AuditLog.open(sample)
    assert info.value.line == 8 and info.value.path == str(sample)


def test_reopening_with_edited_last_record_raises(sample: Path) -> None:
    lines = read_lines(sample)
    lines[-1] = lines[-1].replace(b"round 3", b"round 4")
    write_lines(sample, lines)
    with pytest.raises(AuditLogError, match="line 7: last record hash mismatch"):
        AuditLog.open(sample)


def test_single_line_log_reopens(log_path: Path) -> None:
    write_sample(log_path, rounds=0)
    with AuditLog.open(log_path) as log:
        assert log.head[0] == 1


def test_long_last_line_is_read_back(log_path: Path) -> None:
    with AuditLog.open(log_path) as log:
        log.output({"type": "note"}, context=CTX)
        rec = log.output({"type": "note", "blob": "x" * 200_000}, context=CTX)
    with AuditLog.open(log_path) as log:
        assert log.head == (2, rec["hash"])


def test_second_writer_on_the_same_file_is_refused(log_path: Path) -> None:
    pytest.importorskip("fcntl")
    with AuditLog.open(log_path) as log:
        log.output({"type": "note"}, context=CTX)
        with pytest.raises(AuditLogError, match="another writer"):
            AuditLog.open(log_path)
    with AuditLog.open(log_path) as again:  # lock released on close
        assert again.head[0] == 1


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
def test_new_file_mode_is_0640(log_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        AuditLog.open(log_path).close()
    finally:
        os.umask(old)
    assert log_path.stat().st_mode & 0o777 == 0o640


# --------------------------------------------------------------------------- what may be written


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"amount": 1.5}, "record.output.amount"),
        ({"cards": [1, 2.0]}, r"record.output.cards\[1\]"),
        ({"x": float("nan")}, "record.output.x"),
        ({"deep": {"er": [{"f": 0.0}]}}, r"record.output.deep.er\[0\].f"),
    ],
)
def test_floats_are_rejected(log_path: Path, payload: dict, path: str) -> None:
    with AuditLog.open(log_path) as log:
        log.output({"type": "note"}, context=CTX)
        head = log.head
        with pytest.raises(TypeError, match=rf"{path}: float .* never contain floats"):
            log.output(payload, context=CTX)
        assert log.head == head  # nothing written, chain untouched
        log.output({"type": "note"}, context=CTX)
    assert len(read_lines(log_path)) == 2
    assert verify_file(log_path).ok


def test_float_in_header_profile_is_rejected() -> None:
    log = AuditLog.to_stream(io.StringIO())
    with pytest.raises(TypeError, match=r"record\.profile\.penetration: float"):
        log.header(software=SOFTWARE, table="T", profile={"penetration": 0.75}, settings={})


def test_other_non_json_values_are_rejected() -> None:
    log = AuditLog.to_stream(io.StringIO())
    with pytest.raises(TypeError, match="set is not allowed"):
        log.output({"x": {1, 2}}, context=CTX)
    with pytest.raises(TypeError, match="keys must be strings"):
        log.output({1: "x"}, context=CTX)
    assert log.head == (0, GENESIS)


def test_writer_fields_cannot_be_supplied_by_the_caller() -> None:
    log = AuditLog.to_stream(io.StringIO())
    for key in ("seq", "ts", "prev", "hash"):
        with pytest.raises(ValueError, match="set by the writer"):
            log.write("note", CTX, **{key: 1})
    with pytest.raises(ValueError, match="clash"):
        log.write("note", CTX, table="other")
    with pytest.raises(ValueError, match="kind"):
        log.write("", CTX)


def test_context_is_checked() -> None:
    log = AuditLog.to_stream(io.StringIO())
    with pytest.raises(ValueError, match="missing"):
        log.input({"type": "card"}, line=1, context={"table": "T", "shoe": 1, "round": 1})
    with pytest.raises(ValueError, match="unknown context key"):
        log.output({}, context={**CTX, "dealer": "x"})
    with pytest.raises(TypeError, match="'shoe' must be an int"):
        log.output({}, context={**CTX, "shoe": "1"})
    assert log.head == (0, GENESIS)


# --------------------------------------------------------------------------- structlog


def test_structlog_is_used_without_global_configuration(log_path: Path) -> None:
    configured_before = structlog.is_configured()
    config_before = structlog.get_config()
    with AuditLog.open(log_path) as log:
        log.output({"type": "note"}, context=CTX)
        proxy = log.logger
        assert proxy._cache_logger_on_first_use is False
        assert proxy._logger is log.writer  # the writer is the final (wrapped) logger
        assert proxy._context_class is dict
        log.output({"type": "note"}, context=CTX)
        assert "bind" not in vars(proxy)  # a caching proxy would have replaced bind()
    assert structlog.is_configured() == configured_before
    assert structlog.get_config() == config_before


def test_global_structlog_configuration_does_not_leak_in(log_path: Path) -> None:
    was_configured = structlog.is_configured()
    saved = structlog.get_config()

    def boom(logger, name, event_dict):  # pragma: no cover - must never run
        raise AssertionError("global processor ran on an audit record")

    try:
        structlog.configure(processors=[boom], cache_logger_on_first_use=True)
        with AuditLog.open(log_path) as log:
            log.output({"type": "note"}, context=CTX)
            log.output({"type": "note"}, context=CTX)
            assert "bind" not in vars(log.logger)
    finally:
        structlog.reset_defaults()
        if was_configured:
            structlog.configure(**saved)
    assert verify_file(log_path).ok


# --------------------------------------------------------------------------- layer rule


# Modules of the audit package that sit on top of the chain core and run the engine
# (replay, crash recovery, reports). The core never imports them (the session imports the core).
ENGINE_AWARE = {"replay.py", "recovery.py", "report"}  # report: the package, every module


def _imported_names(source: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # "from a import b" is a.b (module or name)
            names += [f"{node.module or ''}.{alias.name}" for alias in node.names]
    return names


def test_audit_package_imports_no_devices_and_no_engine() -> None:
    """The chain core: standard library, structlog, orjson (the fast canonical encoding),
    cryptography (the witness's Ed25519 signatures), the text boundary (controller.jsontext,
    a leaf), the input-file check (controller.inputfiles, a leaf), the compiled modules' loader
    (controller.native, a leaf) and itself only (no engine, no devices)."""
    allowed_third_party = {"structlog", "orjson", "cryptography"}
    engine_aware = {f"controller.audit.{name.removesuffix('.py')}" for name in ENGINE_AWARE}
    core = [p for p in sorted(AUDIT_PKG.glob("*.py")) if p.name not in ENGINE_AWARE]
    assert {p.name for p in core} >= {"__init__.py", "canonical.py", "writer.py", "verify.py"}
    for source in core:
        for name in _imported_names(source):
            top = name.split(".")[0]
            ok = (
                top in sys.stdlib_module_names
                or top in allowed_third_party
                or (name.startswith("controller.audit")
                    and not any(name.startswith(e) for e in engine_aware))
                or name.startswith("controller.jsontext")
                or name.startswith("controller.inputfiles")  # (a leaf: the standard library)
                or name.startswith("controller.native")  # (a leaf: which modules run compiled)
                or name.startswith("__future__")
            )
            assert ok, f"{source.name} imports {name}"


def test_engine_aware_audit_modules_import_no_devices() -> None:
    sources = [source for name in sorted(ENGINE_AWARE)
               for source in ([AUDIT_PKG / name] if name.endswith(".py")
                              else sorted((AUDIT_PKG / name).glob("*.py")))]
    assert {s.name for s in sources} >= {"replay.py", "recovery.py", "build.py", "html.py"}
    for source in sources:
        name = source.relative_to(AUDIT_PKG).as_posix()
        for imported in _imported_names(source):
            top = imported.split(".")[0]
            assert top not in {"drivers", "simulators"}, f"{name} imports {imported}"
            assert top in sys.stdlib_module_names or top in {"controller", "__future__"}, (
                f"{name} imports {imported}")


# --------------------------------------------------------------------------- the document


def _doc_block(lang: str) -> str:
    match = re.search(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert match, f"no ```{lang} block in {DOC}"
    return match.group(1)


@pytest.fixture
def doc_script(tmp_path: Path) -> Path:
    script = tmp_path / "verify_audit_log.py"
    script.write_text(_doc_block("python"), encoding="utf-8")
    return script


def _run(script: Path, *args: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", str(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_doc_script_uses_only_the_standard_library(doc_script: Path) -> None:
    tree = ast.parse(doc_script.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] in sys.stdlib_module_names, alias.name
        elif isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] in sys.stdlib_module_names, node.module


def test_doc_script_accepts_a_good_log(doc_script: Path, sample: Path) -> None:
    proc = _run(doc_script, sample)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = json.loads(read_lines(sample)[-1])["hash"]
    assert f"ok, 7 records, head {head}" in proc.stdout


def test_doc_script_accepts_escapes_and_non_ascii(doc_script: Path, log_path: Path) -> None:
    with AuditLog.open(log_path) as log:
        log.header(software=SOFTWARE, table="BJ-3", profile={"a": [1, None, True]}, settings={})
        log.output({"type": "prompt", "text": 'Δ "quoted" \\ \x01 \u2028'}, context=CTX)
    assert _run(doc_script, log_path).returncode == 0


@pytest.mark.parametrize("tamper", ["edit", "delete", "reorder", "insert", "torn", "reformat"])
def test_doc_script_rejects_a_tampered_log(doc_script: Path, sample: Path, tamper: str) -> None:
    lines = read_lines(sample)
    if tamper == "edit":
        lines[2] = lines[2].replace(b"round 1", b"round 9")
    elif tamper == "delete":
        del lines[3]
    elif tamper == "reorder":
        lines[3], lines[4] = lines[4], lines[3]
    elif tamper == "insert":
        third = json.loads(lines[2])
        forged = rehash({**third, "seq": 4, "prev": third["hash"], "output": {"type": "x"}})
        lines.insert(3, line_of(forged))
    elif tamper == "torn":
        lines[-1] = lines[-1][:-10]
    elif tamper == "reformat":
        lines[1] = json.dumps(json.loads(lines[1]), sort_keys=True).encode() + b"\n"
    write_lines(sample, lines)
    assert not verify_file(sample).ok
    proc = _run(doc_script, sample)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED" in proc.stdout


def test_doc_script_usage_error(doc_script: Path) -> None:
    assert _run(doc_script).returncode == 2


def test_doc_worked_example_verifies_and_matches_the_writer() -> None:
    example = _doc_block("jsonl").splitlines(keepends=True)
    assert len(example) == 3
    records = [json.loads(line) for line in example]
    prev = "0" * 64
    for line, rec in zip(example, records, strict=True):
        assert rec["hash"] == expected_hash(rec)
        assert rec["prev"] == prev
        assert line.encode() == line_of(rec)
        prev = rec["hash"]
    assert verify_lines(example).ok

    # the writer, given the same inputs and clock, produces exactly the example
    stream = io.StringIO()
    log = AuditLog.to_stream(stream, clock=FixedClock())
    log.header(
        software=SOFTWARE,
        table="BJ-3",
        profile={"name": "gr-blackjack", "decks": {"count": 6}},
        settings={"durability": "input"},
    )
    log.input({"type": "card", "card": "QH", "t": "2026-11-21T10:15:30Z"}, line=17, context=CTX)
    log.output(
        {"type": "prompt", "state": "dealing", "text": "Δεύτερο φύλλο στο κουτί 1"}, context=CTX
    )
    assert stream.getvalue() == "".join(example)


def test_doc_covers_the_contract() -> None:
    text = DOC.read_text(encoding="utf-8")
    for needle in (
        "GENESIS",
        "sort_keys=True",
        'separators=(",", ":")',
        "ensure_ascii=False",
        "fsync",
        "0.25 ms",
        "sorted",
        "shoewarden audit verify",
        "never contain floating-point",
        "0640",
    ):
        assert needle in text, needle
