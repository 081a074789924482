"""The pages in a real browser (Debian's headless Chromium under Selenium).

The floor shows a new deviation without a reload and an acknowledgement moves it; the
dealer display's next step changes as cards come out; the baccarat board after a known
sequence of coups is the board written out by hand here. Never skipped: a missing
Chromium fails, naming the packages (tests/browser.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
import pytest

from controller.audit import AuditLog
from floor.core import Floor
from floor.serve import ServerThread
from floor.store import FloorStore
from floor.web import display_app, floor_app
from tests.browser import driver
from tests.floor_helpers import append, open_floor, table_log

pytestmark = pytest.mark.slow


def wait_for(what: Callable[[], Any], timeout: float = 10.0, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = what()
        except Exception:  # the page is being swapped under us: try again
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message or what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with driver() as b:
        yield b


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    return table_log(tmp_path_factory.mktemp("src")).read_bytes().splitlines(keepends=True)


def test_the_floor_shows_a_new_deviation_live_and_an_ack_moves_it(
        browser: Any, source: list[bytes], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    dev = next(i for i, line in enumerate(source) if b'"type":"deviation"' in line)
    code = orjson.loads(source[dev])["output"]["code"]
    target = tmp_path / "logs" / "BP-01" / "BP-01-2026-11-21.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(source[:dev]))
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    web = ServerThread(floor_app(floor), "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{web.port}"
    try:
        wait_for(lambda: floor.tables.get("BP-01") and
                 floor.tables["BP-01"].state.last_seq == dev, message="the floor to catch up")
        browser.get(base + "/")
        wait_for(lambda: browser.find_element(By.ID, "stream").text == "live",
                 message="the event stream")
        assert not browser.find_elements(By.CSS_SELECTOR, "tr.alert")
        tile = browser.find_element(By.CSS_SELECTOR, '.tile[data-table="BP-01"]')
        assert tile.get_attribute("data-worst") == "none"

        append(target, source[dev])  # the table writes a deviation; nobody reloads
        alert_id, text = wait_for(lambda: (lambda e: (e.get_attribute("data-alert"), e.text))(
            browser.find_element(By.CSS_SELECTOR, f'tr.alert[data-code="{code}"]')),
            message="the alert row")
        assert "BP-01" in text
        wait_for(lambda: browser.find_element(
            By.CSS_SELECTOR, '.tile[data-table="BP-01"]').get_attribute("data-worst")
            in ("warning", "critical"), message="the tile's colour")

        browser.find_element(By.ID, "ack-by").send_keys("Ann Pit")
        wait_for(lambda: browser.find_element(
            By.CSS_SELECTOR, f'input[data-note-for="{alert_id}"]').send_keys("dealer told")
            or True, message="the note field")
        wait_for(lambda: browser.find_element(
            By.CSS_SELECTOR, f'button[data-ack="{alert_id}"]').click() or True,
            message="the acknowledge button")
        wait_for(lambda: not browser.find_elements(By.CSS_SELECTOR,
                                                   f'tr.alert[data-alert="{alert_id}"]'),
                 message="the acknowledged alert to leave the open list")
        acked = httpx.get(base + "/api/alerts?status=acked").json()
        assert [(a["id"], a["acked_by"], a["note"]) for a in acked] == [
            (int(alert_id), "Ann Pit", "dealer told")]
    finally:
        web.stop()


def test_the_dealer_display_follows_the_next_step_as_cards_come_out(
        browser: Any, source: list[bytes], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    burn = next(i for i, line in enumerate(source) if b'"type":"card"' in line)
    target = tmp_path / "logs" / "BP-01" / "BP-01-2026-11-21.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(source[:burn]))
    floor = Floor([tmp_path / "logs"], FloorStore(":memory:"), keep_records=False)
    web = ServerThread(display_app(floor, "BP-01"), "127.0.0.1", 0).start()
    try:
        wait_for(lambda: floor.tables.get("BP-01"), message="the display's follower")
        browser.get(f"http://127.0.0.1:{web.port}/")

        def prompt() -> str:
            return str(browser.find_element(By.CSS_SELECTOR, '[data-field="prompt"]').text)

        wait_for(lambda: browser.find_element(By.ID, "stream").text == "live")
        before = wait_for(prompt, message="a prompt")
        seen = [before]
        cards_seen = 0
        # deal on, a few records at a time, up to the end of the second round
        second_end = [i for i, line in enumerate(source) if b'"kind":"round"' in line][1]
        for i in range(burn, second_end + 1, 3):
            append(target, b"".join(source[i:min(i + 3, second_end + 1)]))
            wait_for(lambda i=i: int(browser.find_element(
                By.CSS_SELECTOR, ".table-live").get_attribute("data-last-seq")) >= min(
                    i + 3, second_end + 1), message="the page to catch up")
            text = prompt()
            if text != seen[-1]:
                seen.append(text)
            cards_seen = max(cards_seen, len(browser.find_elements(
                By.CSS_SELECTOR, "#current .cards .card")))
        assert len(seen) >= 3, seen  # burn → bets → deal → …: the step changed as cards came
        assert any(s.startswith("Deal round") for s in seen), seen
        assert cards_seen >= 4
        assert browser.find_element(By.CSS_SELECTOR, "#current").get_attribute(
            "data-ended") == "yes"
    finally:
        web.stop()


# the board a person draws for this shoe: B B P T P P P P P P P B T T B P
COUPS = ["Banco", "Banco", "Punto", "Egalite", "Punto", "Punto", "Punto", "Punto", "Punto",
         "Punto", "Punto", "Banco", "Egalite", "Egalite", "Banco", "Punto"]
BEAD_PLATE_BY_HAND = [  # rows of the bead plate, columns left to right ("." empty)
    "BPT",
    "BPT",
    "PPB",
    "TPP",
    "PP.",
    "PB.",
]
BIG_ROAD_BY_HAND = [  # rows of the big road ("." empty; digits are ties on that cell)
    "BP2P",
    "BPB.",
    ".P..",
    ".P..",
    ".P..",
    ".PPP",
]
BIG_ROAD_TIES = {(1, 0): 1, (2, 0): 2}  # (column, row): ties marked on that cell


def _baccarat_log(path: Path) -> None:
    """A shoe of baccarat coups in a log, in the records' own shapes (header, inputs,
    the referee's round notes)."""
    t0 = dt.datetime(2026, 11, 21, 10, tzinfo=dt.UTC)
    path.parent.mkdir(parents=True)
    log = AuditLog.open(path, durability="none", clock=lambda: t0)
    log.header(software={"name": "shoewarden", "version": "test"}, table="BP-07",
               profile={"name": "gr-banco-punto", "game": "baccarat", "card_source": "shoe",
                        "shuffler": {"continuous": False}}, settings={})
    ctx: dict[str, Any] = {"table": "BP-07", "shoe": 1, "round": 0, "state": "ready"}
    hands = {"Banco": (["2C", "3D"], ["9H", "KS"]), "Punto": (["9D", "KC"], ["2H", "3S"]),
             "Egalite": (["4C", "3H"], ["5D", "2S"])}
    for n, winner in enumerate(COUPS, start=1):
        punto, banco = hands[winner]
        log.input({"type": "bets_closed", "t": "2026-11-21T10:00:00Z"}, line=None,
                  context={**ctx, "round": n - 1, "state": "ready"})
        for card in (punto[0], banco[0], punto[1], banco[1]):
            log.input({"type": "card", "card": card, "t": "2026-11-21T10:00:01Z"}, line=None,
                      context={**ctx, "round": n, "state": "round"})
        log.input({"type": "round_end", "t": "2026-11-21T10:00:02Z"}, line=None,
                  context={**ctx, "round": n, "state": "round"})
        cards = [{"card": c, "to": to, "why": "deal"} for c, to in
                 zip((punto[0], banco[0], punto[1], banco[1]),
                     ("punto", "banco", "punto", "banco"), strict=True)]
        log.output({"type": "note", "kind": "round", "text": f"round {n}: {winner}",
                    "data": {"round": n, "winner": winner, "cards": cards, "punto": 0,
                             "banco": 0, "naturals": [], "dummy": False}},
                   context={**ctx, "round": n, "state": "ready"})
    log.close()


def test_the_baccarat_board_after_known_coups_is_the_board_drawn_by_hand(
        browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _baccarat_log(tmp_path / "logs" / "BP-07" / "BP-07-2026-11-21.jsonl")
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    web = ServerThread(floor_app(floor), "127.0.0.1", 0).start()
    try:
        wait_for(lambda: floor.tables.get("BP-07") and
                 len(floor.tables["BP-07"].state.rounds) == len(COUPS))
        browser.get(f"http://127.0.0.1:{web.port}/tables/BP-07")

        def grid(table_id: str) -> list[str]:
            rows = browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tr")
            return ["".join(td.get_attribute("data-winner") or "." for td in
                            row.find_elements(By.TAG_NAME, "td")) for row in rows]

        plate = grid("bead-plate")
        assert [row[:3] for row in plate] == BEAD_PLATE_BY_HAND
        assert all(set(row[3:]) <= {"."} for row in plate)
        road = grid("big-road")
        drawn = [row[:4].replace("T", ".") for row in road]
        expected = [row.replace("2", "B") for row in BIG_ROAD_BY_HAND]
        assert drawn == expected
        ties = {}
        for r, row in enumerate(browser.find_elements(By.CSS_SELECTOR, "#big-road tr")):
            for c, td in enumerate(row.find_elements(By.TAG_NAME, "td")):
                n = int(td.get_attribute("data-ties") or 0)
                if n:
                    ties[(c, r)] = n
        assert ties == BIG_ROAD_TIES
        counts = browser.find_element(By.CSS_SELECTOR, "#board .counts").text
        assert counts == "Banco 4 · Punto 9 · Egalité 3"
    finally:
        web.stop()
