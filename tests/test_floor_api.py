"""The floor's JSON API, pages and live stream (Starlette's TestClient; a real server for SSE)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
import pytest
from starlette.testclient import TestClient

from floor.serve import ServerThread
from floor.views import Disclosure
from floor.web import floor_app
from tests.floor_helpers import append, drain, open_floor, table_log

TABLE_KEYS = {"table", "profile", "state", "shoe", "round", "cards_left", "last_ts",
              "open_alerts"}
ALERT_KEYS = {"id", "table", "seq", "code", "severity", "message", "rule", "ts", "acked_by",
              "acked_at", "note"}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logs")
    table_log(root)
    table_log(root, "BJ-01", "gr-blackjack", "gr-blackjack-day.jsonl")
    return root


def _client(logs: Path, work: Path, **kw: Any) -> TestClient:
    floor = open_floor([logs], work)
    drain(floor)
    return TestClient(floor_app(floor, follow=False, **kw))


def test_tables_and_alerts_keep_the_issues_names(logs: Path, tmp_path: Path) -> None:
    with _client(logs, tmp_path) as c:
        tables = c.get("/api/tables").json()
        assert [t["table"] for t in tables] == ["BJ-01", "BP-01"]
        assert all(set(t) >= TABLE_KEYS for t in tables)
        bp = tables[1]
        assert (bp["profile"], bp["state"], bp["shoe"]) == ("gr-banco-punto", "closed", 1)
        alerts = c.get("/api/alerts").json()
        assert alerts and all(set(a) >= ALERT_KEYS for a in alerts)
        assert [a["ts"] for a in alerts] == sorted((a["ts"] for a in alerts), reverse=True)
        assert bp["open_alerts"] == sum(1 for a in alerts if a["table"] == "BP-01")
        assert c.get("/api/alerts?status=acked").json() == []
        assert c.get("/api/alerts?status=nope").status_code == 400


def test_ack_moves_an_alert_from_open_to_acked(logs: Path, tmp_path: Path) -> None:
    with _client(logs, tmp_path) as c:
        first = c.get("/api/alerts").json()[-1]
        r = c.post(f"/api/alerts/{first['id']}/ack", json={"by": "Ann Pit", "note": "seen"})
        assert r.status_code == 200 and r.json()["acked_by"] == "Ann Pit"
        assert first["id"] not in [a["id"] for a in c.get("/api/alerts").json()]
        acked = c.get("/api/alerts?status=acked").json()
        assert [(a["id"], a["note"]) for a in acked] == [(first["id"], "seen")]
        assert len(c.get("/api/alerts?status=all").json()) == len(
            c.get("/api/alerts").json()) + 1
        again = c.post(f"/api/alerts/{first['id']}/ack", json={"by": "Bo", "note": ""})
        assert again.status_code == 409 and "Ann Pit" in again.json()["error"]
        assert c.post("/api/alerts/99999/ack", json={"by": "Bo"}).status_code == 404
        assert c.post(f"/api/alerts/{first['id']}/ack", content=b"{").status_code == 400
        nobody = c.get("/api/alerts").json()[0]["id"]
        assert c.post(f"/api/alerts/{nobody}/ack", json={"note": "x"}).status_code == 400


def test_round_lookup_lays_the_hands_out_as_the_audit_report(logs: Path, tmp_path: Path) -> None:
    from controller.audit.report import build_report
    from controller.audit.report.rounds import round_lines

    with _client(logs, tmp_path) as c:
        found = c.get("/api/tables/BJ-01/rounds?round=3").json()
        assert len(found) == 1
        r = found[0]
        assert (r["round"], r["shoe"]) == (3, 1)
        assert r["cards"] and all(c_["to"] and c_["seq"] for c_ in r["cards"])
        report = build_report([next((logs / "BJ-01").glob("*.jsonl"))])
        ((day, info),) = report.find_round(3)
        assert r["layout"] == round_lines(day, info)
        assert c.get("/api/tables/BJ-01/rounds?round=x").status_code == 400
        assert c.get("/api/tables/NOPE/rounds").status_code == 404
        assert c.get("/api/tables/BJ-01/rounds?round=999").json() == []


def test_pages_render_every_table_and_the_board(logs: Path, tmp_path: Path) -> None:
    with _client(logs, tmp_path) as c:
        page = c.get("/").text
        assert 'data-table="BP-01"' in page and 'data-table="BJ-01"' in page
        assert "Acknowledge" in page and "/static/floor.js" in page
        bp = c.get("/tables/BP-01").text
        assert 'id="bead-plate"' in bp and 'id="big-road"' in bp
        bj = c.get("/tables/BJ-01/live").text
        assert 'class="hands"' in bj and "bead-plate" not in bj
        assert c.get("/tables/NOPE").status_code == 404
        assert c.get("/static/floor.js").status_code == 200
        assert "http" not in c.get("/static/floor.css").text  # no CDN, no remote font


def test_round_disclosure_hides_a_round_in_progress(tmp_path: Path) -> None:
    source = table_log(tmp_path / "src").read_bytes()
    lines = source.splitlines(keepends=True)
    # stop just after a card dealt in a round (before its round_end)
    n = next(i for i, line in enumerate(lines)
             if b'"type":"card"' in line and b'"state":"round"' in line and i > 60)
    target = tmp_path / "logs" / "BP-01" / "BP-01-2026-11-21.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(lines[: n + 1]))
    for disclosure, hidden in ((Disclosure.LIVE, False), (Disclosure.ROUND, True),
                               (Disclosure.SHOE, True)):
        with _client(tmp_path / "logs", tmp_path / str(disclosure),
                     disclosure=disclosure) as c:
            view = c.get("/api/tables/BP-01").json()
            cur = view["current"]
            assert cur is not None and not cur["ended"]
            assert cur["hidden"] is hidden and (cur["cards"] == []) is hidden
            assert cur["cards_out"] >= 1
    with _client(tmp_path / "logs", tmp_path / "shoe2", disclosure=Disclosure.SHOE) as c:
        assert all(r["hidden"] and not r["cards"] for r in c.get(
            "/api/tables/BP-01").json()["recent"])
        assert c.get("/api/tables/BP-01/rounds?round=2").status_code == 403


def _sse(url: str, got: list[dict[str, Any]], ready: threading.Event,
         stop: threading.Event) -> None:
    try:
        with httpx.stream("GET", url, timeout=30) as r:
            ready.set()
            event = None
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event:
                    got.append({"event": event, **orjson.loads(line[6:])})
                if stop.is_set():
                    return
    except httpx.HTTPError:
        if not stop.is_set():
            raise


def test_the_stream_carries_a_new_deviation_as_it_is_written(tmp_path: Path) -> None:
    source = table_log(tmp_path / "src").read_bytes()
    lines = source.splitlines(keepends=True)
    dev = next(i for i, line in enumerate(lines) if b'"type":"deviation"' in line)
    target = tmp_path / "logs" / "BP-01" / "BP-01-2026-11-21.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(lines[:dev]))
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    web = ServerThread(floor_app(floor), "127.0.0.1", 0).start()
    got: list[dict[str, Any]] = []
    ready, stop = threading.Event(), threading.Event()
    reader = threading.Thread(target=_sse, args=(f"http://127.0.0.1:{web.port}/api/events",
                                                  got, ready, stop), daemon=True)
    reader.start()
    try:
        assert ready.wait(5)
        deadline = time.monotonic() + 5
        while floor.tables.get("BP-01") is None or floor.tables["BP-01"].state.last_seq < dev:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        append(target, lines[dev])
        deadline = time.monotonic() + 5
        while not any(e["event"] == "alert" for e in got):
            assert time.monotonic() < deadline, got
            time.sleep(0.02)
        alert = next(e for e in got if e["event"] == "alert")["alert"]
        assert alert["seq"] == dev + 1 and alert["table"] == "BP-01"
        r = httpx.post(f"http://127.0.0.1:{web.port}/api/alerts/{alert['id']}/ack",
                       json={"by": "Ann Pit", "note": ""})
        assert r.status_code == 200
        deadline = time.monotonic() + 5
        while not any(e["event"] == "ack" for e in got):
            assert time.monotonic() < deadline, got
            time.sleep(0.02)
    finally:
        stop.set()
        web.stop()
