"""The session writes inputs ahead of outputs, and a log replays to the same outputs."""

from __future__ import annotations

import io
import json

import pytest

from controller.audit import AuditLog, verify_lines
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile, profile_from_dict, profile_names
from controller.session import TableSession
from simulators.dealer import DayPlan, table_day


def _day_with_mistakes(name: str) -> list[dict]:
    steps = table_day(load_profile(name), seed=11, plan=DayPlan(shoes=1, rounds_per_block=6))
    events = [s.event for s in steps]
    shuffles = [i for i, s in enumerate(steps) if s.phase == "shuffle"]
    del events[shuffles[-1]]  # the last shoe is loaded or dealt unshuffled
    events.insert(5, {"type": "round_end"})  # an event out of place
    return events


@pytest.mark.parametrize("name", profile_names())
def test_log_replays_to_identical_outputs(name: str) -> None:
    stream = io.StringIO()
    session = TableSession(load_profile(name), AuditLog.to_stream(stream))
    for n, event in enumerate(_day_with_mistakes(name), start=1):
        session.feed(parse_event(event), line=n)
    assert session.tally.deviations  # the mutations were flagged
    lines = stream.getvalue().splitlines(keepends=True)
    assert verify_lines(lines).ok
    records = [json.loads(line) for line in lines]
    header = records[0]
    # Replay from the log alone: the profile in the header, the inputs in order.
    replayed = TableEngine(profile_from_dict(header["profile"]))
    logged_outputs: list[dict] = []
    replay_outputs: list[dict] = []
    for record in records[1:]:
        if record["kind"] == "input":
            assert record["state"] == replayed.state  # context is the state before
            replay_outputs += [o.to_record() for o in replayed.handle(parse_event(record["event"]))]
        elif record["kind"] == "output":
            logged_outputs.append(record["output"])
    assert replay_outputs == logged_outputs


def test_input_is_written_before_the_engine_runs(mocker) -> None:
    stream = io.StringIO()
    session = TableSession(load_profile("gr-blackjack"), AuditLog.to_stream(stream))
    seen_at_handle: list[int] = []
    real = session.engine.handle

    def spy(event):
        seen_at_handle.append(len(stream.getvalue().splitlines()))
        return real(event)

    mocker.patch.object(session.engine, "handle", side_effect=spy)
    session.feed(parse_event({"type": "table_open", "table": "T", "decks": 6}), line=1)
    # header + the input record were already written when the engine saw the event
    assert seen_at_handle == [2]
    kinds = [json.loads(line)["kind"] for line in stream.getvalue().splitlines()]
    assert kinds[:2] == ["header", "input"] and set(kinds[2:]) == {"output"}


def test_log_holds_no_card_before_it_left_the_shoe() -> None:
    stream = io.StringIO()
    session = TableSession(load_profile("gr-blackjack"), AuditLog.to_stream(stream))
    steps = table_day(load_profile("gr-blackjack"), seed=5, plan=DayPlan(shoes=1))
    for step in steps:
        session.feed(parse_event(step.event))
    for line in stream.getvalue().splitlines():
        record = json.loads(line)
        if record.get("kind") == "input" and record["event"]["type"] == "deck_check":
            cards = record["event"]["cards"]
            assert cards == sorted(cards)  # composition only, never a shuffled order
