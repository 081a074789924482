"""Shared helpers for the audit tests (tests/test_audit_*.py); no tests of its own.

Logs are made the way the controller makes them: a correct table day from the
reference dealer (simulators.dealer.table_day) fed through a TableSession into an
AuditLog. Expected hashes and forgeries are computed here with hashlib + json,
never with the code under test.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from controller.audit import AnchorSink, AuditLog, open_table_log
from controller.events import parse_event
from controller.profiles import Profile, load_profile
from controller.session import TableSession
from simulators.dealer import DayPlan, table_day

GENESIS = "0" * 64
KEY = bytes(range(32))
KEY_HEX = KEY.hex()


def canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def expected_hash(record: dict[str, Any]) -> str:
    return hashlib.sha256(canon({k: v for k, v in record.items() if k != "hash"})).hexdigest()


def expected_mac(key: bytes, prev_mac: str, record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k not in ("hash", "mac")}
    return hmac.new(key, prev_mac.encode() + canon(body), hashlib.sha256).hexdigest()


def rehash(record: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k != "hash"}
    out["hash"] = expected_hash(out)
    return out


def line_of(record: dict[str, Any]) -> bytes:
    return canon(record) + b"\n"


def read_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_lines(path)]


def day_events(profile: Profile, date: dt.date, *, table: str = "T1", seed: int = 0,
               shoes: int = 1, sabot: str | None = "S-07") -> list[dict[str, Any]]:
    plan = DayPlan(shoes=shoes, rounds_per_block=6, table=table,
                   start=dt.datetime(date.year, date.month, date.day, 10, tzinfo=dt.UTC))
    events = [dict(s.event) for s in table_day(profile, seed, plan)]
    if events[0]["type"] == "table_open":
        if sabot is None:
            events[0].pop("sabot", None)
        else:
            events[0]["sabot"] = sabot
    return events


def feed_log(log: AuditLog, profile: Profile, events: list[dict[str, Any]],
             settings: dict[str, Any] | None = None) -> TableSession:
    session = TableSession(profile, log, settings or {"durability": "input"})
    for n, event in enumerate(events, start=1):
        session.feed(parse_event(event), line=n)
    return session


def write_day(root: Path, date: dt.date, *, name: str = "gr-blackjack", table: str = "T1",
              key: bytes | None = None, anchors: AnchorSink | None = None, seed: int = 0,
              sabot: str | None = "S-07", settings: dict[str, Any] | None = None,
              events: list[dict[str, Any]] | None = None) -> Path:
    """One table day through open_table_log + TableSession; returns the day's file."""
    profile = load_profile(name)
    log = open_table_log(root, table, date, key=key, anchors=anchors, durability="none")
    evs = events if events is not None else day_events(profile, date, table=table, seed=seed,
                                                       sabot=sabot)
    session = feed_log(log, profile, evs, settings)
    path = Path(log.writer.name)
    session.close()
    return path


DAYS = (dt.date(2026, 11, 19), dt.date(2026, 11, 20), dt.date(2026, 11, 21))


def rotated_set(root: Path, *, key: bytes | None = None, anchors: AnchorSink | None = None,
                name: str = "gr-blackjack", table: str = "T1") -> list[Path]:
    """Three days of one table: three files, one chain."""
    return [write_day(root, d, name=name, table=table, key=key, anchors=anchors, seed=i)
            for i, d in enumerate(DAYS)]
