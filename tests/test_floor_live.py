"""The floor against a bench writing its log at the same time, restarted mid-day."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from floor.alerts import CHAIN_BREAK
from floor.web import floor_app
from tests.floor_helpers import deviations_in, drain, open_floor

pytestmark = pytest.mark.slow


def test_a_floor_restarted_mid_day_has_every_record_and_alert_of_a_live_bench_once(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    bench = subprocess.Popen(
        [sys.executable, "-m", "controller", "bench", "--scenario", "dealer-mistakes",
         "--table", "BJ-01", "--log", str(logs), "--pace", "0.003", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        floor = open_floor([logs], tmp_path / "floor")
        deadline = time.monotonic() + 60
        while floor.records_ingested < 200:  # part of the day, read while it is written
            assert time.monotonic() < deadline and bench.poll() is None
            floor.poll()
            time.sleep(0.02)
        mid = floor.records_ingested
        first_alerts = {a.key for a in floor.alerts.values()}
        floor.stop()
        floor.store.close()
        floor = open_floor([logs], tmp_path / "floor")  # the restart, while the bench deals
        assert {a.key for a in floor.alerts.values()} == first_alerts
        while bench.poll() is None:
            floor.poll()
            time.sleep(0.02)
        out = bench.stdout.read() if bench.stdout else ""
        assert bench.returncode == 0, out
        drain(floor)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    (path,) = (logs / "BJ-01").glob("BJ-01-*.jsonl")
    lines = path.read_bytes().count(b"\n")
    assert 200 <= mid < lines
    assert floor.store.stats()["records"] == lines
    expected = sorted((seq, code) for seq, code, sev in deviations_in(path)
                      if sev in ("warning", "critical"))
    assert expected
    with TestClient(floor_app(floor, follow=False)) as client:
        alerts = client.get("/api/alerts?status=all").json()
        tables = client.get("/api/tables").json()
    assert sorted((a["seq"], a["code"]) for a in alerts) == expected  # each once
    assert not [a for a in alerts if a["code"] == CHAIN_BREAK]
    assert [(t["table"], t["state"], t["open_alerts"]) for t in tables] == [
        ("BJ-01", "closed", len(expected))]


def test_bench_serves_its_dealer_display_while_it_deals(tmp_path: Path) -> None:
    import httpx2 as httpx

    bench = subprocess.Popen(
        [sys.executable, "-m", "controller", "bench", "--profile", "gr-banco-punto",
         "--shoes", "1", "--seed", "4", "--log", str(tmp_path / "logs"), "--pace", "0.004",
         "--display", "127.0.0.1:0", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert bench.stdout is not None
        url = None
        for line in bench.stdout:
            if "dealer display at " in line:
                url = line.split("dealer display at ", 1)[1].strip()
                break
        assert url and url.startswith("http://127.0.0.1:")
        seen_states = set()
        prompts = set()
        deadline = time.monotonic() + 60
        while bench.poll() is None and time.monotonic() < deadline:
            try:
                state = httpx.get(url + "api/state", timeout=2).json()
            except httpx.HTTPError:
                break  # the bench ended and its display with it
            if state:
                assert state["table"] == "T1" and state["profile"] == "gr-banco-punto"
                seen_states.add(state["state"])
                prompts.add(state["prompt"])
            time.sleep(0.05)
        page = None
        assert {"round", "ready"} & seen_states, seen_states
        assert len(prompts) >= 2
        assert bench.wait(60) == 0
        page = bench.stdout.read()
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert page is not None and "result: OK" in page


def test_the_demo_deals_several_tables_the_floor_follows(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    demo = subprocess.run(
        [sys.executable, "-m", "controller", "demo", "--tables", "3", "--http", "127.0.0.1:0",
         "--duration", "8", "--pace", "0.01", "--log", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=env)
    assert demo.returncode == 0, demo.stderr
    assert "the floor:  http://127.0.0.1:" in demo.stdout
    tables = sorted(p.name for p in (tmp_path / "tables").iterdir() if p.is_dir())
    assert tables == ["BJ-01", "BP-02", "ST-03"]
    floor = open_floor([tmp_path / "tables"], tmp_path / "check")
    drain(floor)
    assert {t: floor.tables[t].state.profile for t in tables} == {
        "BJ-01": "gr-blackjack", "BP-02": "gr-banco-punto", "ST-03": "gr-stud-poker"}
    # the demo's own floor saw as much, and the mistakes scenario made alerts
    last = demo.stdout.strip().splitlines()[-1]
    assert "record(s) read" in last and " 0 alert(s)" not in last


@pytest.mark.parametrize(("argv", "said"), [
    (["demo", "--log", "FILE", "--duration", "1"], "cannot make"),
    (["demo", "--tables", "100000"], "at most 24 tables, got 100000"),
    (["demo", "--tables", "4", "--http", "127.0.0.1:65534"],  # (65536–65538 were printed)
     "the 4 dealer display(s) take the ports after it (65535–65538), past 65535"),
    (["sim", "--profile", "gr-blackjack", "--decks", "999999"], "at most 24 decks"),
])
def test_demo_and_sim_refuse_what_they_cannot_do(tmp_path: Path, argv: list[str],
                                                 said: str) -> None:
    # a review: `demo --log FILE` raised NotADirectoryError; `--tables 100000` started
    # hundreds of tables; `sim --decks 999999` built a 4 GB pack
    a_file = tmp_path / "bj.jsonl"
    a_file.write_text("")
    argv = [str(a_file) if a == "FILE" else a for a in argv]
    r = subprocess.run([sys.executable, "-m", "controller", *argv], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_dealer_display_port_in_use_is_not_offered() -> None:
    """A review: with a display's port taken the demo printed its URL all the same (another
    program's page), and the bench behind it dealt with no display."""
    import socket

    from controller.app.demo import _free

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        where = f"127.0.0.1:{taken.getsockname()[1]}"
        assert not _free(where)
    assert _free(where)
