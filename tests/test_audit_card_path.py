"""The audit log's card path (issue 9): typed records sealed once and written in batches,
and the verifier's run-at-once check. Each test pins what the fast path must still do
exactly as the general one: the same bytes, the same chain, every float and every
non-canonical line still found, a failed batch never breaking the chain.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import io
import json
import os
from pathlib import Path

import pytest

from controller.audit import AuditLog, AuditLogError, ChainStart, verify_file
from controller.audit.timestamps import SystemStamp, format_ts
from controller.events import parse_event
from controller.outputs import Note, Prompt, Transition
from controller.profiles import load_profile
from controller.session import TableSession

T0 = dt.datetime(2026, 11, 21, 10, 15, 30, 123456, tzinfo=dt.UTC)
CTX = {"table": "BJ-3", "shoe": 1, "round": 2, "state": "round"}


def clock() -> dt.datetime:
    return T0


def canon(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


@pytest.mark.parametrize("key", [None, b"k" * 32])
@pytest.mark.parametrize("chain", [None, {"continues": {"seq": 40, "hash": "a" * 64}}])
def test_typed_records_are_the_bytes_of_the_dict_methods(tmp_path: Path, key: bytes | None,
                                                         chain: dict | None) -> None:
    """input_event/outputs write exactly what input/output write for the same values, in a
    keyed log and in a file whose first record carries its chain too."""
    card = parse_event({"type": "card", "card": "7H", "t": "2026-11-21T10:00:00Z"})
    outs = [Note("round", "round 2", {"cards": 4}), Transition("round", "ready", "round_end"),
            Prompt("ready", "Bets open.")]
    typed, plain = tmp_path / "typed.jsonl", tmp_path / "plain.jsonl"
    start = None if chain is None else ChainStart(40, "a" * 64)
    with AuditLog.open(typed, clock=clock, key=key, chain=chain, start=start) as log:
        log.input_event(card, line=7, context=CTX)
        log.outputs(outs, context=CTX)
        log.input_event(card, line=None, context={**CTX, "table": None, "state": 'a"b'})
    with AuditLog.open(plain, clock=clock, key=key, chain=chain, start=start) as log:
        log.input(card.to_record(), line=7, context=CTX)
        for o in outs:
            log.output(o.to_record(), context=CTX)
        log.input(card.to_record(), line=None, context={**CTX, "table": None, "state": 'a"b'})
    assert typed.read_bytes() == plain.read_bytes()
    for line in typed.read_bytes().splitlines():  # canonical, hash over the rest
        rec = json.loads(line)
        assert canon(rec) == line
        body = {k: v for k, v in rec.items() if k != "hash"}
        assert hashlib.sha256(canon(body)).hexdigest() == rec["hash"]
    assert verify_file(typed, key=key).ok


def test_a_big_integer_goes_the_general_way(tmp_path: Path) -> None:
    """orjson cannot encode an int beyond 64 bits: the record is still written canonically."""
    path = tmp_path / "log.jsonl"
    with AuditLog.open(path, clock=clock) as log:
        log.outputs([Note("n", "big", {"n": 2**70})], context=CTX)
    assert b'"n":1180591620717411303424' in path.read_bytes()
    assert verify_file(path).ok


def test_only_outputs_made_once_are_encoded_once(tmp_path: Path, mocker) -> None:  # type: ignore[no-untyped-def]
    # the engine makes one Transition per move and one Prompt per text, never changed:
    # the log keeps their encodings by identity; a note holds a dict that may change, and
    # one logged twice (as the same object) is encoded again
    path = tmp_path / "log.jsonl"
    move, ask = Transition("betting", "dealing", "bets_closed"), Prompt("dealing", "Deal")
    note = Note("n", "x", {"k": 1})
    spies = [mocker.spy(type(o), "to_record") for o in (move, ask, note)]
    with AuditLog.open(path, clock=clock) as log:
        log.outputs([move, ask, note], context=CTX)
        note.data["k"] = 2  # type: ignore[index]
        log.outputs([move, ask, note], context=CTX)
    assert [s.call_count for s in spies] == [1, 1, 2]
    outputs = [json.loads(line)["output"] for line in path.read_bytes().splitlines()]
    assert [o.get("data") for o in outputs] == [None, None, {"k": 1}, None, None, {"k": 2}]
    assert verify_file(path).ok


def test_a_move_under_a_device_fault_is_one_object_too() -> None:
    # the engine reports a move made under a fault with its own Transition: made once, as
    # every move is, or each would be a new entry of the log's cache (a review)
    from controller.outputs import transition

    moved = transition("dealing", "dealing", "card", under_fault=True)
    assert moved is transition("dealing", "dealing", "card", under_fault=True)
    assert moved.under_fault and moved is not transition("dealing", "dealing", "card")


def test_the_outputs_of_one_input_are_one_write(tmp_path: Path, mocker) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "log.jsonl"
    log = AuditLog.open(path, clock=clock)
    write = mocker.spy(os, "write")
    fsync = mocker.spy(os, "fsync")
    log.input_event(parse_event({"type": "card", "card": "7H"}), line=1, context=CTX)
    assert (write.call_count, fsync.call_count) == (1, 1)  # write-ahead: durable at once
    log.outputs([Note("a", "a"), Note("b", "b"), Note("c", "c")], context=CTX)
    assert (write.call_count, fsync.call_count) == (2, 1)  # three records, one write
    assert len(path.read_bytes().splitlines()) == 4
    log.close()


def test_bulk_records_wait_for_a_flush_under_none(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = AuditLog.open(path, durability="none", clock=clock)
    for n in range(50):
        log.input_event(parse_event({"type": "card", "card": "7H"}), line=n, context=CTX)
        log.outputs([Note("n", "x")], context=CTX)
    assert path.read_bytes() == b""  # batched
    assert log.head[0] == 100
    log.flush()
    assert len(path.read_bytes().splitlines()) == 100
    log.close()
    assert verify_file(path).ok


def test_a_batch_that_cannot_be_written_leaves_the_chain_whole(tmp_path: Path,
                                                                monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A full disk fails a batch: the file keeps its last whole record, the error names the
    records lost, and the next record links to what is really in the file."""
    path = tmp_path / "log.jsonl"
    log = AuditLog.open(path, durability="none", clock=clock)
    log.outputs([Note("n", "kept")], context=CTX)
    log.flush()
    size = path.stat().st_size
    real = os.write
    full = {"on": True}

    def write(fd: int, data: bytes) -> int:
        if full["on"] and os.path.realpath(f"/proc/self/fd/{fd}") == str(path.resolve()):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    log.outputs([Note("n", "lost 1"), Note("n", "lost 2")], context=CTX)
    with pytest.raises(AuditLogError, match=r"seq 2–3: .*last whole record"):
        log.flush()
    assert path.stat().st_size == size and log.head[0] == 1
    full["on"] = False
    log.outputs([Note("n", "after")], context=CTX)
    log.close()
    result = verify_file(path)
    assert result.ok and result.records == 2


def test_the_system_stamp_is_format_ts() -> None:
    stamp = SystemStamp()
    for _ in range(3):
        before = dt.datetime.now(dt.UTC).replace(microsecond=0)
        text = stamp()
        after = dt.datetime.now(dt.UTC)
        assert len(text) == 24 and text.endswith("Z") and text[19] == "."
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        assert before <= when <= after
        assert format_ts(when) == text


def _day_log(tmp_path: Path) -> Path:
    from test_audit_helpers import DAYS, day_events

    profile = load_profile("gr-blackjack")
    path = tmp_path / "day.jsonl"
    session = TableSession(profile, AuditLog.open(path, durability="none"))
    for n, event in enumerate(day_events(profile, DAYS[0], seed=2)[:700], start=1):
        session.feed(parse_event(event), line=n)
    session.close()
    return path


def _rehashed(line: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    rec = json.loads(line)
    edit(rec)
    rec.pop("hash")
    rec["hash"] = hashlib.sha256(canon(rec)).hexdigest()
    return canon(rec) + b"\n"


@pytest.mark.parametrize("number", ["1.5", "1E5", "1e5", "1e16", "1e+16", "-2e-07", "2e-7",
                                    "12e20", "0.0"])
def test_a_float_in_a_long_log_is_found_whatever_its_form(tmp_path: Path, number: str) -> None:
    """Deep inside a run of good lines (the verifier checks runs at once), a rehashed record
    holding a float in any JSON form is found, at its line."""
    path = _day_log(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    n = 300

    def edit(rec: dict) -> None:
        rec["output" if "output" in rec else "event"]["amount"] = 0

    line = _rehashed(lines[n], edit).replace(b'"amount":0', b'"amount":' + number.encode())
    rec = json.loads(line)
    body = line[:-1].replace(b'"hash":"' + rec["hash"].encode() + b'",', b"")
    lines[n] = line.replace(rec["hash"].encode(), hashlib.sha256(body).hexdigest().encode())
    path.write_bytes(b"".join(lines))
    result = verify_file(path)
    assert not result.ok and result.first_bad_line == n + 1
    assert "float" in result.reason


def test_a_text_that_looks_like_a_float_is_no_float(tmp_path: Path) -> None:
    """Text such as ":1e" or "1.5" inside a string sends a run to the line-by-line path,
    which accepts it: no false alarm."""
    path = tmp_path / "log.jsonl"
    with AuditLog.open(path, durability="none") as log:
        for n in range(300):
            text = "ratio :1e3 and ,-2e5 or [7e1 at 1.5" if n == 150 else f"note {n}"
            log.outputs([Note("n", text)], context=CTX)
    assert verify_file(path).ok


def test_a_non_canonical_line_inside_a_run_is_named(tmp_path: Path) -> None:
    path = _day_log(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    n = 400
    rec = json.loads(lines[n])
    spaced = json.dumps(rec, sort_keys=True, ensure_ascii=False).encode() + b"\n"
    lines[n] = spaced
    path.write_bytes(b"".join(lines))
    result = verify_file(path)
    assert (result.first_bad_line, result.first_bad_seq) == (n + 1, rec["seq"])
    assert "canonical form" in result.reason


def test_a_stream_log_is_written_through(tmp_path: Path) -> None:
    stream = io.StringIO()
    log = AuditLog.to_stream(stream, clock=clock)
    log.outputs([Note("n", "x")], context=CTX)
    assert stream.getvalue().count("\n") == 1


def test_a_seq_of_true_is_no_seq(tmp_path: Path) -> None:
    """``true == 1`` in Python: the run check must still want an integer."""
    path = tmp_path / "log.jsonl"
    with AuditLog.open(path, durability="none") as log:
        for n in range(200):
            log.outputs([Note("n", f"note {n}")], context=CTX)
    lines = path.read_bytes().splitlines(keepends=True)
    out = [_rehashed(lines[0], lambda rec: rec.update(seq=True))]
    for line in lines[1:]:  # the whole chain rewritten after it, so only the seq is wrong
        prev = json.loads(out[-1])["hash"]
        out.append(_rehashed(line, lambda rec, prev=prev: rec.update(prev=prev)))
    path.write_bytes(b"".join(out))
    result = verify_file(path)
    assert not result.ok and result.first_bad_line == 1 and "seq" in result.reason
