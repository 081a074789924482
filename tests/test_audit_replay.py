"""``audit replay``: the engine re-run on a log's inputs reproduces every logged output."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_audit_helpers import (
    day_events,
    feed_log,
    line_of,
    read_lines,
    records,
    rotated_set,
    write_lines,
)

from controller.audit import AuditLog, verify_file
from controller.audit.replay import ReplayError, replay
from controller.cli import main
from controller.profiles import load_profile, profile_names

ROOT = Path(__file__).resolve().parent.parent
DAY = dt.date(2026, 11, 21)


def _log(tmp_path: Path, name: str, events: list[dict], settings: dict | None = None) -> Path:
    path = tmp_path / f"{name}.jsonl"
    with AuditLog.open(path, durability="none") as log:
        feed_log(log, load_profile(name), events, settings)
    return path


def _mistakes(name: str) -> list[dict]:
    """A day full of deviations: skipped steps, duplicates, faults, events out of place."""
    events = day_events(load_profile(name), DAY, seed=5)
    shuffles = [i for i, e in enumerate(events) if e["type"] == "shuffle"]
    cards = [i for i, e in enumerate(events) if e["type"] == "card"]
    n = len(cards)
    out = list(events)
    # later positions first, so the earlier indices still hold
    out.append({"type": "card", "card": "AS"})  # after close
    out[cards[n * 3 // 4]] = {**out[cards[n * 3 // 4]],
                              "card": out[cards[n * 3 // 4 - 1]]["card"]}  # a duplicate
    out.insert(cards[n * 2 // 3] + 1, {"type": "device_ok", "device": "shoe", "code": "jam"})
    out.insert(cards[n // 2], {"type": "device_fault", "device": "shoe", "code": "jam"})
    out.insert(cards[n // 3], {"type": "round_end"})  # out of place
    out.insert(cards[n // 4], {"type": "table_open", "table": "T1", "decks": 3})  # a second open
    del out[shuffles[0]]  # never shuffled
    return out


@pytest.mark.parametrize("name", profile_names())
def test_correct_day_replays_identically(tmp_path: Path, name: str) -> None:
    path = _log(tmp_path, name, day_events(load_profile(name), DAY, seed=3))
    assert verify_file(path).ok
    result = replay([path])
    assert result.identical, [str(d) for d in result.differences[:3]]
    inputs = [r for r in records(path) if r["kind"] == "input"]
    outputs = [r for r in records(path) if r["kind"] == "output"]
    assert (result.inputs, result.outputs, result.headers) == (len(inputs), len(outputs), 1)
    assert any(r["output"]["type"] == "note" and r["output"]["kind"] == "round" for r in outputs)


@pytest.mark.parametrize("name", profile_names())
def test_day_full_of_deviations_replays_identically(tmp_path: Path, name: str) -> None:
    path = _log(tmp_path, name, _mistakes(name))
    outputs = [r["output"] for r in records(path) if r["kind"] == "output"]
    codes = {o["code"] for o in outputs if o["type"] == "deviation"}
    assert {"SHUFFLE_MISSING", "UNEXPECTED_EVENT", "DEVICE_FAULT"} <= codes, codes
    result = replay([path])
    assert result.identical, [str(d) for d in result.differences[:3]]


def _doctor(path: Path, pick, change) -> int:
    """Change the first record ``pick`` accepts (and rehash nothing: replay is not verify)."""
    lines = read_lines(path)
    for i, raw in enumerate(lines):
        rec = json.loads(raw)
        if pick(rec):
            change(rec)
            lines[i] = line_of(rec)
            write_lines(path, lines)
            return rec["seq"]
    raise AssertionError("nothing to doctor")


def test_doctored_output_is_reported_with_its_seq(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY))

    def change(rec: dict) -> None:
        rec["output"]["text"] = rec["output"]["text"].replace("lose", "win")

    seq = _doctor(path, lambda r: r["kind"] == "output" and r["output"]["type"] == "note"
                  and r["output"]["kind"] == "round" and "lose" in r["output"]["text"], change)
    result = replay([path])
    assert [d.seq for d in result.differences] == [seq]
    (diff,) = result.differences
    assert diff.what == "the output differs" and "win" in diff.logged["text"]
    assert "lose" in diff.replayed["text"]


def test_doctored_deviation_severity_and_removed_output(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-banco-punto", _mistakes("gr-banco-punto"))

    def soften(rec: dict) -> None:
        rec["output"]["severity"] = "info"

    seq = _doctor(path, lambda r: r["kind"] == "output"
                  and r["output"]["type"] == "deviation"
                  and r["output"]["severity"] == "critical", soften)
    assert [d.seq for d in replay([path]).differences] == [seq]
    lines = read_lines(path)
    idx = next(i for i, raw in enumerate(lines) if json.loads(raw)["seq"] == seq)
    before = json.loads(lines[idx - 1])
    del lines[idx]
    write_lines(path, lines)
    result = replay([path])
    (diff,) = result.differences
    assert "the log does not have" in diff.what and diff.replayed["severity"] == "critical"
    # named at the record where it is missing, or by the input that caused it
    after = json.loads(lines[idx]) if idx < len(lines) else None
    inputs = [json.loads(raw) for raw in lines[:idx] if json.loads(raw)["kind"] == "input"]
    assert diff.seq in ({after["seq"]} if after else set()) | {inputs[-1]["seq"]}
    assert before["seq"] < seq


def test_doctored_input_changes_the_outputs(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY))

    def move_cut_card(rec: dict) -> None:
        rec["event"]["behind"] = 5

    _doctor(path, lambda r: r["kind"] == "input" and r["event"]["type"] == "cut_card_placed",
            move_cut_card)
    result = replay([path])
    assert result.differences
    assert any(d.replayed and d.replayed.get("code") == "CUT_CARD_POSITION"
               for d in result.differences)


def test_context_difference_is_reported(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY))

    def other_round(rec: dict) -> None:
        rec["round"] = 99

    seq = _doctor(path, lambda r: r["kind"] == "input" and r["round"] == 3, other_round)
    (diff,) = replay([path]).differences
    assert diff.seq == seq and "context" in diff.what


def test_an_outputs_context_difference_names_the_engines_context(tmp_path: Path) -> None:
    """An output whose logged context is not the one the engine had after its input: the
    difference names both, the engine's as table, shoe, round and state."""
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY))
    found: list[dict] = []

    def other_state(rec: dict) -> None:
        found.append(dict(rec))
        rec["state"] = "closed"

    seq = _doctor(path, lambda r: r["kind"] == "output" and r["round"] == 3
                  and r["state"] != "closed", other_state)
    (diff,) = replay([path]).differences
    (true,) = found
    assert diff.seq == seq and diff.what == "the context of the output differs"
    assert diff.logged == {"table": true["table"], "shoe": true["shoe"], "round": 3,
                           "state": "closed"}
    assert diff.replayed == {k: true[k] for k in ("table", "shoe", "round", "state")}


def test_replay_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _log(tmp_path, "gr-chemin-de-fer", day_events(load_profile("gr-chemin-de-fer"), DAY))
    assert main(["audit", "replay", str(path)]) == 0
    assert "identical" in capsys.readouterr().out

    def change(rec: dict) -> None:
        rec["output"]["to"] = "ready"

    seq = _doctor(path, lambda r: r["kind"] == "output" and r["output"]["type"] == "transition"
                  and r["output"]["to"] == "shoe_complete", change)
    assert main(["audit", "replay", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"DIFFERENT: seq {seq} (" in out and "1 difference(s)" in out
    assert main(["audit", "replay", str(tmp_path / "missing.jsonl")]) == 2
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("{not json\n")
    assert main(["audit", "replay", str(garbage)]) == 2
    headless = tmp_path / "headless.jsonl"
    headless.write_text(json.dumps({"kind": "input", "event": {"type": "shuffle"}}) + "\n")
    assert main(["audit", "replay", str(headless)]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "not a JSON record" in err and "before any header" in err


def test_replay_without_a_header_raises(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ReplayError, match="no header"):
        replay([empty])


def test_replay_of_a_bad_profile_in_the_header(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY)[:5])

    def break_profile(rec: dict) -> None:
        rec["profile"]["decks"]["min"] = "six"

    _doctor(path, lambda r: r["kind"] == "header", break_profile)
    with pytest.raises(ReplayError, match=r"decks\.min"):
        replay([path])
    proc = subprocess.run([sys.executable, "-m", "controller", "audit", "replay", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_a_header_whose_profile_is_a_name_says_so(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY)[:5])

    def name_only(rec: dict) -> None:
        rec["profile"] = "gr-blackjack"

    _doctor(path, lambda r: r["kind"] == "header", name_only)
    with pytest.raises(ReplayError, match="its profile is not a table of rules "
                                          "\\(got 'gr-blackjack'\\)"):
        replay([path])


def test_torn_last_line_is_ignored_with_a_note(tmp_path: Path) -> None:
    path = _log(tmp_path, "gr-blackjack", day_events(load_profile("gr-blackjack"), DAY))
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    result = replay([path])
    assert any("torn last line" in n for n in result.notes)


def test_a_set_whose_files_do_not_follow_one_another_does_not_replay_identically(
        tmp_path: Path) -> None:
    """Each file of a table's set starts a session of its own at its header, so a day
    deleted, two days given swapped, or a day's last record cut replayed "identical" (a
    review of the audit tools over rotated day files): where one file ends and the next
    begins, the seq must go on; a torn line in a file that a later one follows is damage.
    The whole set, in order, still replays identically."""
    days = rotated_set(tmp_path / "logs")
    assert replay(days).identical
    gap = replay([days[0], days[2]])  # the middle day left out (or deleted)
    assert not gap.identical and "ended at seq" in gap.differences[0].what
    assert gap.differences[0].file == str(days[2])
    assert not replay([days[1], days[0], days[2]]).identical  # swapped
    lines = read_lines(days[0])
    write_lines(days[0], lines[:-1])  # the first day's last record cut
    cut = replay(days)
    assert str(days[1]) in [d.file for d in cut.differences]  # (the day after names it)
    write_lines(days[0], [*lines[:-1], lines[-1][:15]])  # …or torn, a day after it
    torn = replay(days)
    assert any("a torn line in a file that a later file follows" in d.what
               for d in torn.differences)


def test_two_tables_logs_replay_each_on_its_own_chain(tmp_path: Path) -> None:
    """A review: two tables' days given together were 'records or files missing, moved or
    out of order' where one table's file ended and the other's began."""
    one = rotated_set(tmp_path / "a", table="T1")
    two = rotated_set(tmp_path / "b", table="T2")
    assert replay([*one, *two]).identical
    assert replay([one[2], two[0]]).identical
    gap = replay([one[0], one[2], *two])  # (one table's days must still follow on)
    assert [d.file for d in gap.differences] == [str(one[2])]
