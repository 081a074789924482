"""SABOT_ROTATION (001 §3): a sabot on the same table at its last K openings,
live and in reports.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest
from test_audit_helpers import day_events, line_of, read_lines, records, write_day, write_lines

from controller.audit.history import (
    Opening,
    history_for,
    history_settings,
    placements,
    sabot_history,
)
from controller.audit.replay import replay
from controller.audit.report import build_report, render_text
from controller.audit.report.build import _TableOpenings
from controller.deviations import CATALOG, Deviation, Severity
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile
from controller.session import TableSession

PROFILE = load_profile("gr-chemin-de-fer")
DAYS = [dt.date(2026, 11, d) for d in (17, 18, 19, 20)]


def _open(engine: TableEngine, sabot: str | None = "S-07", table: str = "T1",
          day: dt.date = DAYS[-1]) -> list[Deviation]:
    event = {"type": "table_open", "table": table, "decks": 8, "t": f"{day}T10:00:00Z"}
    if sabot is not None:
        event["sabot"] = sabot
    return [o for o in engine.handle(parse_event(event)) if isinstance(o, Deviation)]


def _history(*sabots: str | None, table: str = "T1") -> dict:
    return {table: [{"date": str(DAYS[i]), "sabot": s} for i, s in enumerate(sabots)]}


def test_same_sabot_at_the_last_k_openings_is_flagged_at_table_open() -> None:
    engine = TableEngine(PROFILE, sabot_history=_history("S-07", "S-07", "S-07"))
    (dev,) = _open(engine)
    spec = CATALOG["SABOT_ROTATION"]
    assert (dev.code, dev.severity, spec.severity) == ("SABOT_ROTATION", Severity.WARNING,
                                                       Severity.WARNING)
    assert dev.rule == PROFILE.rule("") and "001 §3" in dev.message
    assert dev.evidence == {"sabot": "S-07", "table": "T1", "k": 3,
                            "openings": [str(d) for d in DAYS[:3]]}
    assert engine.state == "opening_check"  # the table opens all the same


@pytest.mark.parametrize(("history", "sabot", "table"), [
    (("S-07", "S-07"), "S-07", "T1"),  # only K-1 earlier openings
    (("S-07", "S-03", "S-07"), "S-07", "T1"),  # another sabot among the last K
    (("S-07", "S-07", "S-07"), "S-04", "T1"),  # a different sabot today
    (("S-07", "S-07", "S-07"), "S-07", "T2"),  # another table's history
    (("S-07", "S-07", "S-07"), None, "T1"),  # no sabot named at the opening
    ((None, "S-07", "S-07"), "S-07", "T1"),  # an opening without a sabot breaks the run
])
def test_not_flagged(history: tuple, sabot: str | None, table: str) -> None:
    engine = TableEngine(PROFILE, sabot_history=_history(*history))
    assert _open(engine, sabot, table) == []


def test_k_is_a_setting_and_older_openings_do_not_count() -> None:
    engine = TableEngine(PROFILE, sabot_history=_history("S-01", "S-07", "S-07"),
                         sabot_rotation_k=2)
    (dev,) = _open(engine)
    assert dev.evidence["k"] == 2 and dev.evidence["openings"] == [str(DAYS[1]), str(DAYS[2])]
    assert _open(TableEngine(PROFILE, sabot_history=_history("S-07", "S-01", "S-07"),
                             sabot_rotation_k=2)) == []


def test_a_table_reopened_the_same_day_with_its_sabot_is_one_placement() -> None:
    """Reopened the same day with the sabot it had: the same placement, not judged or
    counted again (four openings of one day were flagged). A reopening with another
    sabot, or the same sabot on the next days, counts as before."""
    engine = TableEngine(PROFILE, sabot_history=_history("S-07", "S-07"))
    assert _open(engine, day=DAYS[2]) == []  # the third opening in a row: K = 3 not reached
    for _ in range(3):
        engine.handle(parse_event({"type": "table_close", "t": f"{DAYS[2]}T18:00:00Z"}))
        assert _open(engine, day=DAYS[2]) == []  # reopened that day: one placement
    engine.handle(parse_event({"type": "table_close", "t": f"{DAYS[2]}T23:00:00Z"}))
    (dev,) = _open(engine, day=DAYS[3])  # the next day: the fourth placement
    assert dev.evidence["openings"] == [str(d) for d in DAYS[:3]]


def test_openings_seen_by_the_engine_count_too() -> None:
    engine = TableEngine(PROFILE, sabot_history=_history("S-07", "S-07"))
    assert _open(engine, day=DAYS[2]) == []
    engine.handle(parse_event({"type": "table_close"}))
    (dev,) = _open(engine, day=DAYS[3])  # the next day, the same sabot: the fourth time
    assert dev.evidence["openings"][-1] == str(DAYS[2])


def test_bad_history_or_k_is_refused() -> None:
    with pytest.raises(ValueError, match="sabot_rotation_k"):
        TableEngine(PROFILE, sabot_rotation_k=0)
    with pytest.raises(ValueError, match="sabot_history"):
        TableEngine(PROFILE, sabot_history={"T1": "S-07"})
    with pytest.raises(ValueError, match=r"\.sabot must be a string"):
        TableEngine(PROFILE, sabot_history={"T1": [{"date": "2026-11-17", "sabot": 7}]})


def _session_log(tmp_path: Path, settings: dict) -> Path:
    path = tmp_path / "day.jsonl"
    from controller.audit import AuditLog

    with AuditLog.open(path, durability="none") as log:
        session = TableSession(PROFILE, log, settings)
        for event in day_events(PROFILE, DAYS[-1]):
            session.feed(parse_event(event))
    return path


def test_session_setting_reaches_the_engine_and_the_header_and_replay_reproduces_it(
        tmp_path: Path) -> None:
    settings = {"sabot_history": _history("S-07", "S-07", "S-07"), "sabot_rotation_k": 3}
    path = _session_log(tmp_path, settings)
    recs = records(path)
    assert recs[0]["settings"]["sabot_history"] == settings["sabot_history"]
    logged = [r for r in recs if r["kind"] == "output"
              and r["output"].get("code") == "SABOT_ROTATION"]
    assert len(logged) == 1 and logged[0]["round"] == 0
    result = replay([path])
    assert result.identical
    # the decision comes from the header: without the history there, replay disagrees
    lines = read_lines(path)
    header = json.loads(lines[0])
    header["settings"].pop("sabot_history")
    write_lines(path, [line_of(header), *lines[1:]])
    (diff,) = replay([path]).differences
    assert diff.seq == logged[0]["seq"] and diff.logged["code"] == "SABOT_ROTATION"


def test_history_from_the_log_directory_feeds_the_live_check(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    for i, day in enumerate(DAYS[:3]):
        write_day(root, day, name=PROFILE.name, seed=i)
    assert sabot_history(root, "T1", DAYS[3]) == [{"date": str(d), "sabot": "S-07"}
                                                  for d in DAYS[:3]]
    assert sabot_history(root, "T1", DAYS[1]) == [{"date": str(DAYS[0]), "sabot": "S-07"}]
    settings = history_settings(root, "T1", DAYS[3])
    path = write_day(root, DAYS[3], name=PROFILE.name, seed=9, settings=settings)
    codes = [r["output"]["code"] for r in records(path)
             if r["kind"] == "output" and r["output"]["type"] == "deviation"]
    assert codes == ["SABOT_ROTATION"]
    assert replay([path]).identical


def test_report_flags_rotation_from_earlier_days_when_the_engine_had_no_history(
        tmp_path: Path) -> None:
    root = tmp_path / "logs"
    paths = [write_day(root, day, name=PROFILE.name, seed=i) for i, day in enumerate(DAYS)]
    assert not any(r["kind"] == "output" and r["output"].get("code") == "SABOT_ROTATION"
                   for p in paths for r in records(p))  # live: no history given
    report = build_report([paths[-1]])
    (dev,) = [d for d in report.days[0].deviations if d.code == "SABOT_ROTATION"]
    assert dev.source == "report" and dev.severity == "warning"
    assert dev.evidence["openings"] == [str(d) for d in DAYS[:3]]
    assert "SABOT_ROTATION [warning]: 1" in render_text(report)
    # the third day had only two before it
    third = build_report([paths[2]])
    assert not [d for d in third.days[0].deviations if d.code == "SABOT_ROTATION"]


def test_report_does_not_flag_when_the_sabot_moved(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    paths = []
    for i, day in enumerate(DAYS):
        sabot = "S-03" if i == 1 else "S-07"
        paths.append(write_day(root, day, name=PROFILE.name, seed=i, sabot=sabot))
    report = build_report([paths[-1]])
    assert not [d for d in report.days[0].deviations if d.code == "SABOT_ROTATION"]


def test_report_counts_a_table_reopened_the_same_day_as_one_placement(tmp_path: Path) -> None:
    """Two openings on the third day, both with the sabot of the two days before: the
    second is the same placement as the first (not the fourth), as live."""
    from test_audit_helpers import day_events

    root = tmp_path / "logs"
    for i, day in enumerate(DAYS[:2]):
        write_day(root, day, name=PROFILE.name, seed=i)
    twice = [*day_events(PROFILE, DAYS[2], table="T1", seed=2, sabot="S-07"),
             *day_events(PROFILE, DAYS[2], table="T1", seed=3, sabot="S-07")]
    path = write_day(root, DAYS[2], name=PROFILE.name, events=twice)
    report = build_report([path])
    assert len(report.days[0].openings) == 2
    assert not [d for d in report.days[0].deviations if d.code == "SABOT_ROTATION"]
    # the next day it is the fourth placement in a row
    later = write_day(root, DAYS[3], name=PROFILE.name, seed=4)
    (dev,) = [d for d in build_report([later]).days[0].deviations
              if d.code == "SABOT_ROTATION"]
    assert dev.evidence["openings"] == [str(d) for d in DAYS[:3]]


def test_report_does_not_double_a_live_decision(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    for i, day in enumerate(DAYS[:3]):
        write_day(root, day, name=PROFILE.name, seed=i)
    path = write_day(root, DAYS[3], name=PROFILE.name, seed=9,
                     settings=history_settings(root, "T1", DAYS[3]))
    devs = [d for d in build_report([path]).days[0].deviations if d.code == "SABOT_ROTATION"]
    assert [d.source for d in devs] == ["log"]


def test_the_reports_index_of_openings_gives_what_history_for_gives() -> None:
    # the report looks the history before each opening up (it rescanned every opening for
    # each: 1,000 openings took 10 s); it must find what history_for and a same-day scan find
    rng = random.Random(7)
    days = ["", "2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23"]
    compared = 0
    for _ in range(1500):
        n = rng.randint(0, 25)
        ops = [Opening(rng.choice(days), seq, rng.choice(["T1", "T2"]),
                       rng.choice(["S-1", "S-2", None]), "f", 1)
               for seq in rng.sample(range(200), n)]
        date, seq, k = rng.choice([*days, "2026-11-24"]), rng.randint(0, 201), rng.randint(1, 4)
        earlier = [o for o in ops if o.table == "T1" and o.date < date]
        today = [o.to_history() for o in sorted(o for o in ops if o.table == "T1"
                                                and o.date == date and o.seq < seq)]
        want = (placements(history_for(earlier, "T1", date, k) + today)[-k:],
                today[-1] if today else None)
        rows = sorted((o for o in ops if o.table == "T1"), key=lambda o: (o.date, o.seq))
        if rows:
            assert _TableOpenings(rows).before(date, seq, k) == want
            compared += bool(want[0])
    assert compared > 500  # (most cases have a history to compare)
