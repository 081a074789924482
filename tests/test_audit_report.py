"""``audit report``: a known day in text, disputed rounds laid out, and self-contained HTML.

The expected figures are counted from the simulated dealer's steps (phases,
events), not taken from the code under test.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_audit_helpers import feed_log

from controller.audit import AuditLog
from controller.audit.report import build_report, render_round, render_text
from controller.audit.report.html import render_html
from controller.cards import baccarat_value, pack
from controller.cli import main
from controller.profiles import load_profile
from controller.screening.evidence import run_text
from simulators import shuffles
from simulators.dealer import DayPlan, Step, table_day
from tests.browser import FLAGS, chromium

START = dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC)
BURN_PHASES = ("burn", "dealer_change_burn")


def _steps(name: str, seed: int = 2, shoes: int = 2) -> list[Step]:
    return table_day(load_profile(name), seed, DayPlan(shoes=shoes, table="BJ-3", start=START))


def _at(t: str) -> str:
    """How a report shows a time: dated, UTC, to the second."""
    return t[:19] + "Z"


def _known_day() -> list[Step]:
    """gr-blackjack, 2 shoes, with a cut card placed outside the window, a fault, a new dealer."""
    steps = _steps("gr-blackjack")
    placed = next(i for i, s in enumerate(steps) if s.phase == "cut_card_placed")
    steps[placed] = Step(steps[placed].phase, {**steps[placed].event, "behind": 10},
                         steps[placed].shoe, steps[placed].round)
    bets = [i for i, s in enumerate(steps) if s.phase == "bets_closed"]
    t_fault, t_ok = steps[bets[4] - 1].event["t"], steps[bets[4]].event["t"]
    t_dealer = steps[bets[2]].event["t"]
    steps.insert(bets[4], Step("fault", {"type": "device_ok", "device": "shoe", "code": "jam",
                                          "t": t_ok}))
    steps.insert(bets[4], Step("fault", {"type": "device_fault", "device": "shoe", "code": "jam",
                                          "t": t_fault}))
    steps.insert(bets[2], Step("dealer", {"type": "dealer_change", "dealer": "D9",
                                           "t": t_dealer}))
    return steps


def _write(tmp_path: Path, name: str, steps: list[Step], file: str = "day.jsonl") -> Path:
    path = tmp_path / file
    with AuditLog.open(path, durability="none") as log:
        feed_log(log, load_profile(name), [s.event for s in steps])
    return path


@pytest.fixture
def known(tmp_path: Path) -> tuple[Path, list[Step]]:
    steps = _known_day()
    return _write(tmp_path, "gr-blackjack", steps), steps


def _section(text: str, header: str) -> list[str]:
    """The timeline lines under ``header`` (up to the next section)."""
    lines = text.splitlines()
    timeline = lines.index("  timeline:")
    start = next(i for i, line in enumerate(lines)
                 if i > timeline and line.strip().startswith(header))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("      "):
            break
        out.append(line.strip())
    return out


def test_text_report_of_a_known_day(known: tuple[Path, list[Step]]) -> None:
    path, steps = known
    events = [s.event for s in steps]
    text = render_text(build_report([path]))
    rounds = sum(1 for e in events if e["type"] == "bets_closed")
    cards = sum(1 for e in events if e["type"] == "card")
    burned = sum(1 for s in steps if s.phase in BURN_PHASES)
    assert "== table BJ-3, 2026-11-21 (profile gr-blackjack, 6 deck(s), sabot S-07)" in text
    assert f"opened {_at(events[0]['t'])}, closed {_at(events[-1]['t'])}" in text
    assert f"shoes 2, rounds {rounds}, cards {cards} (burned {burned})" in text
    # cut card: declared per shoe, measured = pack − cards drawn since the load
    placed = [e["behind"] for e in events if e["type"] == "cut_card_placed"]
    measured = []
    drawn = None
    for e in events:
        if e["type"] == "shoe_loaded":
            drawn = 0
        elif e["type"] == "card" and drawn is not None:
            drawn += 1
        elif e["type"] == "cut_card":
            measured.append(6 * 52 - drawn)
            drawn = None
    assert "cut card positions (cards behind it; rule 39–65):" in text
    assert f"shoe 1: placed 10, came out {measured[0]}  OUTSIDE" in text
    assert f"shoe 2: placed {placed[1]}, came out {measured[1]}\n" in text
    assert "deviations: 1 (warning 1)" in text and "CUT_CARD_POSITION [warning]: 1" in text
    fault = next(e for e in events if e["type"] == "device_fault")
    ok = next(e for e in events if e["type"] == "device_ok")
    assert f"device faults: 1\n    {_at(fault['t'])} shoe: jam (cleared {_at(ok['t'])})" in text
    dealer = next(e for e in events if e["type"] == "dealer_change")
    assert f"dealer changes: 1\n    {_at(dealer['t'])} dealer D9" in text


def test_timeline_per_shoe_in_order_with_times(known: tuple[Path, list[Step]]) -> None:
    path, steps = known
    text = render_text(build_report([path]))
    first = [s for s in steps if s.shoe == 1]
    shuffle = next(s.event for s in first if s.phase == "shuffle")
    cut = next(s.event for s in first if s.phase == "cut")
    shoe1 = _section(text, "shoe 1:")
    labels = [re.sub(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  ", "", line) for line in shoe1]
    assert shoe1[0] == f"{_at(shuffle['t'])}  shuffle"
    assert labels[1] == f"cut: offset {cut['offset']}"
    assert labels[2] == "cut card placed: 10 card(s) behind it (rule 39–65)"
    assert labels[3].startswith("! CUT_CARD_POSITION [warning] cut card placed with 10")
    assert labels[4:6] == ["loaded", "burn: 5 card(s)"]
    assert labels[6].startswith("rounds 1–")
    assert any(line.startswith("dealer change: dealer D9") for line in labels)
    assert any(line.startswith("device fault: shoe: jam") for line in labels)
    tail = [line.split(":")[0] for line in labels[-3:]]
    assert tail == ["cut card out", "last hand", "shoe complete"]
    shoe2 = _section(text, "shoe 2:")
    assert shoe2[0].endswith("  reshuffle")
    assert _section(text, "opening")[0].endswith("open: sabot S-07, 6 deck(s)")
    assert _section(text, "closing")[-1].endswith("  close")
    # every round of shoe 1 is in the rounds entries, in order
    numbers = [int(n) for line in labels if line.startswith("round")
               for n in re.findall(r"\d+", line.split(":")[0])]
    assert numbers[0] == 1 and numbers == sorted(numbers)


def _bj_total(cards: list[str]) -> tuple[int, bool]:
    values = [11 if c[0] == "A" else 10 if c[0] in "TJQK" else int(c[0]) for c in cards]
    total, aces = sum(values), values.count(11)
    while total > 21 and aces:
        total, aces = total - 10, aces - 1
    return total, aces > 0


def test_round_reconstruction_blackjack(known: tuple[Path, list[Step]]) -> None:
    path, steps = known
    report = build_report([path])
    n = 4
    text = render_round(report, n)
    dealt = [s.event for s in steps if s.event["type"] == "card" and s.round == n
             and s.phase not in BURN_PHASES]
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s+\d+\s+\w\w\s", line)]
    assert [r[1] for r in rows] == [e["card"] for e in dealt]  # every card, in dealing order
    assert [r[4] for r in rows] == [_at(e["t"]) for e in dealt]
    assert all(r[2].startswith(("box", "dealer")) for r in rows)
    assert {r[3] for r in rows} <= {"initial", "hit", "double", "split", "dealer", "exposed",
                                    "offered"}
    bets = next(s.event for s in steps if s.phase == "bets_closed" and s.round == n)
    assert f"bets closed {_at(bets['t'])}" in text and f"boxes {bets['boxes']}" in text
    # each hand's line: its cards (the cards sent to it) and an independently computed total
    for line in text.splitlines():
        m = re.match(r"^    (box[\d.]+|dealer): ((?:\w\w ?)+) = (\d+)", line)
        if not m:
            continue
        name, hand = m.group(1), m.group(2).split()
        sent = [r[1] for r in rows if r[2] == name]
        assert hand == sent, (name, hand, sent)
        assert int(m.group(3)) == _bj_total(hand)[0]
    assert re.search(rf"result: round {n}: .*dealer", text)


def test_round_reconstruction_baccarat(tmp_path: Path) -> None:
    steps = _steps("gr-banco-punto", seed=5, shoes=1)
    path = _write(tmp_path, "gr-banco-punto", steps)
    n = 7
    text = render_round(build_report([path]), n)
    dealt = [s.event["card"] for s in steps if s.event["type"] == "card" and s.round == n
             and s.phase not in BURN_PHASES]
    rows = [line.split() for line in text.splitlines() if re.match(r"^\s+\d+\s+\w\w\s", line)]
    assert [r[1] for r in rows] == dealt
    assert [r[2] for r in rows[:4]] == ["punto", "banco", "punto", "banco"]
    totals = {}
    for side in ("punto", "banco"):
        cards = [r[1] for r in rows if r[2] == side]
        total = sum(baccarat_value(_card(c)) for c in cards) % 10
        totals[side] = total
        assert f"  {side}: {' '.join(cards)} = {total}" in text
    winner = ("Punto" if totals["punto"] > totals["banco"] else
              "Banco" if totals["banco"] > totals["punto"] else "Egalite")
    assert f"  winner: {winner}" in text
    assert render_round(build_report([path]), 10_000) is None


def _round_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if re.match(r"^\s+\d+\s+\w\w\s", line)]


def test_a_blackjack_card_laid_in_another_box_than_it_was_named_to_shows_both(
        tmp_path: Path) -> None:
    """A review: the round's first card named to the second box (DEAL_ORDER, laid there),
    then every card named as dealt: the second box's card of the second pass is owed to
    the first box by then, and the engine lays it there (a ``to`` naming a box owed no
    card of the deal is not read) — the view showed it in the first box, the record's
    ``box`` nowhere. Now the row says ``(recorded to boxY)``; a day whose every card is
    named where the engine lays it shows no such mark."""
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    plain = build_report([_write(tmp_path, "gr-blackjack", steps, "plain.jsonl")])
    n = next(s.round for s in steps if s.phase == "bets_closed"
             and len(s.event.get("boxes", ())) >= 2)
    x, y = (f"box{b}" for b in next(s.event["boxes"] for s in steps
                                    if s.phase == "bets_closed" and s.round == n)[:2])
    # every card named where the engine laid it (its own reading of the round): no mark
    laid: dict[int, list[list[str]]] = {}
    named: list[tuple[int | None, dict[str, Any]]] = []
    for s in steps:
        event = dict(s.event)
        if event["type"] == "card" and s.phase not in BURN_PHASES and s.round is not None:
            rows = laid.setdefault(s.round, _round_rows(render_round(plain, s.round) or ""))
            k = sum(1 for t in named if t[0] == s.round)
            if k < len(rows) and rows[k][1] == event["card"] and rows[k][2] != "discard":
                event["to"] = rows[k][2].split(".")[0]
            named.append((s.round, event))
        else:
            named.append((None, event))
    labelled = [Step(s.phase, e, s.shoe, s.round) for s, (_, e) in zip(steps, named, strict=True)]
    report = build_report([_write(tmp_path, "gr-blackjack", labelled, "named.jsonl")])
    assert "(recorded to" not in "".join(render_round(report, r.round) or ""
                                         for d in report.days for r in d.rounds)
    # the slip: the round's first card named to the second box
    first_card = next(i for i, s in enumerate(labelled) if s.round == n
                      and s.event["type"] == "card" and s.phase not in BURN_PHASES)
    slipped = list(labelled)
    slipped[first_card] = Step("initial", {**labelled[first_card].event, "to": y},
                               labelled[first_card].shoe, n)
    text = render_round(build_report([_write(tmp_path, "gr-blackjack", slipped,
                                             "slip.jsonl")]), n) or ""
    marked = [r for r in _round_rows(text) if "(recorded" in r]
    assert "DEAL_ORDER" in text and len(marked) == 1, text
    assert marked[0][2] == x and marked[0][-1] == f"{y})", marked


def test_a_dealer_card_drawn_against_the_rule_is_shown_with_the_hand_as_dealt(
        tmp_path: Path) -> None:
    """A review: the dealer drew on 17 (DEALER_DRAW_RULE, the card void) and the view
    settled every box against 17 — right, the rule's hand — with the 19 the players saw
    nowhere. The dealer's line now gives the total as dealt beside the void card."""
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    ends = [i for i, s in enumerate(steps) if s.event["type"] == "round_end"]
    n = steps[ends[2]].round
    extra = {"type": "card", "card": "2H", "to": "dealer", "t": steps[ends[2]].event["t"]}
    mutated = [*steps[:ends[2]], Step("dealer", extra, steps[ends[2]].shoe, n),
               *steps[ends[2]:]]
    text = render_round(build_report([_write(tmp_path, "gr-blackjack", mutated)]), n) or ""
    assert "DEALER_DRAW_RULE" in text, text
    line = next(x for x in text.splitlines() if x.startswith("    dealer: "))
    m = re.match(r"    dealer: ((?:\w\w ?)+) = (\d+).*void, not counted: 2H \(as dealt (\d+)",
                 line)
    assert m, line
    assert int(m.group(3)) == _bj_total([*m.group(1).split(), "2H"])[0] != int(m.group(2))


def test_the_round_view_shows_where_among_its_cards_the_cut_card_came_out(
        tmp_path: Path) -> None:
    # a review: the view said when the cut card came out, not between which of the last
    # hand's cards — the auditor matched seqs by hand
    steps = [s for s in _steps("gr-banco-punto", seed=4, shoes=1)]
    at = next(i for i, s in enumerate(steps) if s.event["type"] == "cut_card")
    cut = steps.pop(at)
    n = next(s.round for s in steps[at:] if s.event["type"] == "bets_closed") \
        if steps[at].event["type"] != "card" else steps[at].round
    cards = [i for i, s in enumerate(steps) if s.round == n and s.event["type"] == "card"]
    steps.insert(cards[1] + 1, Step("cut_card", {**cut.event, "t": steps[cards[1]].event["t"]},
                                    cut.shoe, n))
    text = render_round(build_report([_write(tmp_path, "gr-banco-punto", steps)]), n) or ""
    lines = text.splitlines()
    mark = next(i for i, x in enumerate(lines) if "the cut card came out here" in x)
    assert re.match(r"^\s+2\s", lines[mark - 1]) and re.match(r"^\s+3\s", lines[mark + 1]), \
        text
    assert sum("came out here" in x for x in lines) == 1


def test_a_day_opened_after_midnight_at_the_tables_offset_shows_its_own_date(
        tmp_path: Path) -> None:
    """A review: a table at +03:00 opening at 01:32 on the 15th was reported under the
    14th only (the UTC date), while its deck lots were judged on the 15th. The title names
    both; a day whose dates agree names one."""
    steps = _steps("gr-banco-punto", seed=1, shoes=1)
    shifted = []
    for s in steps:
        event = dict(s.event)
        if "t" in event:  # 12 hours earlier, written at +03:00: the day opens at 01:00
            at = dt.datetime.fromisoformat(event["t"]) - dt.timedelta(hours=12)
            event["t"] = at.astimezone(dt.timezone(dt.timedelta(hours=3))).isoformat()
        shifted.append(Step(s.phase, event, s.shoe, s.round))
    opened = dt.datetime.fromisoformat(shifted[0].event["t"])
    utc, local = opened.astimezone(dt.UTC).date(), opened.date()
    assert utc != local
    text = render_text(build_report([_write(tmp_path, "gr-banco-punto", shifted)]))
    assert f"== table BJ-3, {utc} (the table's calendar: {local})" in text
    plain = render_text(build_report([_write(tmp_path, "gr-banco-punto", steps, "z.jsonl")]))
    assert "the table's calendar" not in plain and "== table BJ-3, 2026-11-21 " in plain


def _card(text: str):
    from controller.cards import parse_card

    return parse_card(text)


def test_report_cli(known: tuple[Path, list[Step]], tmp_path: Path,
                    capsys: pytest.CaptureFixture) -> None:
    path, _ = known
    assert main(["audit", "report", str(path)]) == 0
    assert "CUT_CARD_POSITION [warning]: 1" in capsys.readouterr().out
    assert main(["audit", "report", str(path), "--round", "3"]) == 0
    assert "== round 3: table BJ-3" in capsys.readouterr().out
    assert main(["audit", "report", str(path), "--round", "999"]) == 2
    assert "no round 999" in capsys.readouterr().err
    assert main(["audit", "report", str(tmp_path / "missing.jsonl")]) == 2
    html_file = tmp_path / "r.html"
    assert main(["audit", "report", str(path), "--html", str(html_file)]) == 0
    assert html_file.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    # --table alone: that table's days (was ignored); a --log-dir that is not there is said
    other = _write(tmp_path, "gr-banco-punto", table_day(
        load_profile("gr-banco-punto"), 1, DayPlan(shoes=1, table="BP-1", start=START)),
        "other.jsonl")
    capsys.readouterr()
    assert main(["audit", "report", str(path), str(other), "--table", "BP-1"]) == 0
    out = capsys.readouterr().out
    assert "== table BP-1" in out and "== table BJ-3" not in out
    assert main(["audit", "report", str(path), "--table", "NOPE"]) == 2
    assert "no day of table NOPE" in capsys.readouterr().err
    assert main(["audit", "report", str(path), "--log-dir", str(tmp_path / "nowhere")]) == 2
    assert "--log-dir" in capsys.readouterr().err


# --------------------------------------------------------------------------- HTML


VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed",
        "source", "track", "wbr"}
SVG_VOID = {"circle", "line", "rect", "path"}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
            return
        self.stack.pop()

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def test_the_page_is_never_written_over_a_log(known: tuple[Path, list[Step]], tmp_path: Path,
                                             capsys: pytest.CaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A review: ``--html LOG LOG`` replaced the audit log with the page; a directory the
    command may not enter raised PermissionError with a traceback."""
    path, _ = known
    data = path.read_bytes()
    assert main(["audit", "report", "--html", str(path), str(path)]) == 2
    assert "it is one of the logs given" in capsys.readouterr().err
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(data)
    assert main(["audit", "report", "--html", str(copy), str(path)]) == 2
    assert "it holds an audit log" in capsys.readouterr().err
    assert path.read_bytes() == data == copy.read_bytes()
    page = tmp_path / "page.html"
    page.write_text("an older page")
    assert main(["audit", "report", "--html", str(page), str(path)]) == 0  # (replaced)
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    denied = tmp_path / "sub" / "x.html"

    def is_dir(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(Path, "is_dir", is_dir)
    capsys.readouterr()
    assert main(["audit", "report", "--html", str(denied), str(path)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--html {denied}: cannot use it: Permission denied")


def test_html_is_self_contained_and_has_the_same_content(
        known: tuple[Path, list[Step]]) -> None:
    path, _ = known
    report = build_report([path])
    page = render_html(report, report.find_round(4))
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert not parser.errors and parser.stack == [], (parser.errors, parser.stack)
    # nothing from the network: no URL anywhere, no external script, style, font or image
    assert "://" not in page and "url(" not in page and "@import" not in page
    for tag, attrs in parser.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        for name, value in attrs.items():
            assert name not in ("src", "href", "xmlns"), (tag, name, value)
    # the same content as the text report
    text = " ".join(parser.text)
    for needle in ("shoes 2, rounds", "CUT_CARD_POSITION [warning]: 1", "dealer D9",
                   "shoe: jam (cleared", "cut card placed: 10 card(s) behind it",
                   "== round 4: table BJ-3"):
        assert needle in text, needle
    # a sortable deviation table with the inline script that sorts it
    tables = [attrs for tag, attrs in parser.tags if tag == "table"]
    assert any("sortable" in (a.get("class") or "") and "deviations" in (a.get("class") or "")
               for a in tables)
    assert any("addEventListener" in s and "sort" in s for s in parser.scripts)
    # three charts per day as inline SVG; one dot per deviation on the deviation chart
    svgs = [attrs for tag, attrs in parser.tags if tag == "svg"]
    labels = [a.get("aria-label") for a in svgs]
    assert labels == ["deviations over the day", "cut card positions against the window",
                      "cards per shoe"]
    assert page.count('fill="#c77700" fill-opacity="0.75"') == 1  # the one warning
    assert page.count("<title>shoe 1: placed with 10 card(s)") == 1


def test_html_renders_in_headless_chromium(known: tuple[Path, list[Step]],
                                           tmp_path: Path) -> None:
    path, _ = known
    page = tmp_path / "r.html"
    page.write_text(render_html(build_report([path])), encoding="utf-8")
    shot = tmp_path / "shot.png"
    browser = chromium()  # fails naming the Debian packages when missing: never skips
    subprocess.run([browser, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={shot}", "--window-size=1200,3000", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


# --------------------------------------------------------------------------- issue 8


def _cards_in_rounds_entries(text: str) -> int:
    return sum(int(m) for m in re.findall(r"round\(s\), (\d+) card\(s\) dealt", text))


def _burned(text: str) -> int:
    return sum(int(m) for m in re.findall(r"burn: (\d+) card\(s\)", text))


def test_every_card_is_counted_whatever_comes_between(tmp_path: Path) -> None:
    """Entries between cards (a protocol error, a fault) used to stop the round counts:
    244 cards shown where 256 were dealt, "round 1: 0 card(s)" for a 15-card round."""
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    noisy = []
    for s in steps:
        noisy.append(s)
        if s.event["type"] == "card" and s.phase not in BURN_PHASES and s.round in (1, 2, 5):
            noisy.append(Step("noise", {"type": "device_diagnostic", "device": "shoe",
                                        "code": "PROTOCOL_ERROR", "kind": "bad_crc",
                                        "count": 1, "total": 1, "t": s.event["t"]}))
    path = _write(tmp_path, "gr-blackjack", noisy)
    text = render_text(build_report([path]))
    dealt = sum(1 for s in steps if s.event["type"] == "card")
    burned = sum(1 for s in steps if s.phase in BURN_PHASES)
    assert f"cards {dealt} (burned {burned})" in text
    assert _cards_in_rounds_entries(text) + _burned(text) == dealt, text
    first = next(line for line in text.splitlines() if "round 1:" in line)
    round1 = sum(1 for s in steps if s.event["type"] == "card" and s.round == 1
                 and s.phase not in BURN_PHASES)
    assert f"round 1: 1 round(s), {round1} card(s) dealt" in first


def test_a_card_dealt_before_bets_closed_is_laid_out_with_its_round(tmp_path: Path) -> None:
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    bets = next(i for i, s in enumerate(steps) if s.phase == "bets_closed" and s.round == 2)
    first = bets + 1
    assert steps[first].event["type"] == "card"
    early = steps.pop(first)
    steps.insert(bets, early)  # the dealer drew before closing the bets
    path = _write(tmp_path, "gr-blackjack", steps)
    report = build_report([path])
    text = render_round(report, 2)
    assert text is not None
    assert "dealt before bets closed (CARD_BEFORE_BETS_CLOSED):" in text
    assert re.search(rf"-  {early.event['card']}\s+early\s+{_at(early.event['t'])}", text)
    assert "CARD_BEFORE_BETS_CLOSED" in text.split("deviations in this round:")[1]
    # every card of the round with its own time and seq (one card read early blanked all)
    round2 = [early.event] + [s.event for s in steps if s.event["type"] == "card"
                              and s.round == 2 and s.phase not in BURN_PHASES
                              and s is not early]
    rows = [line.split() for line in text.split("cards in dealing order:")[1].splitlines()
            if re.match(r"^\s+\d+\s+\w\w\s", line)]
    assert [(r[1], r[4]) for r in rows] == [(e["card"], _at(e["t"])) for e in round2]
    full = render_text(report)
    dealt = sum(1 for s in steps if s.event["type"] == "card")
    assert _cards_in_rounds_entries(full) + _burned(full) == dealt


def test_times_are_dated_across_midnight(tmp_path: Path) -> None:
    late = dt.datetime(2026, 11, 21, 23, 30, tzinfo=dt.UTC)
    steps = table_day(load_profile("gr-blackjack"), 2, DayPlan(shoes=1, table="BJ-3",
                                                                 start=late))
    path = _write(tmp_path, "gr-blackjack", steps)
    text = render_text(build_report([path]))
    opened, closed = steps[0].event["t"], steps[-1].event["t"]
    assert closed[:10] == "2026-11-22"  # the day ran past midnight
    assert f"opened {_at(opened)}, closed {_at(closed)}" in text


def test_the_report_states_the_chain_verdict_first(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "gr-blackjack", _steps("gr-blackjack", shoes=1))
    assert main(["audit", "report", str(path)]) == 0
    assert capsys.readouterr().out.startswith("chain: verified\n")
    lines = path.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if '"type":"card"' in line and i > 40)
    lines[n] = re.sub(r'"card":"(\w)', lambda m: '"card":"' + ("K" if m[1] != "K" else "Q"),
                      lines[n], count=1)  # one card changed, nothing recomputed
    path.write_text("\n".join(lines) + "\n")
    assert main(["audit", "report", str(path)]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("chain: DOES NOT VERIFY")
    assert "hash mismatch" in out.out.split("\n\n")[0]  # where, before the report
    assert "== table BJ-3" in out.out  # and the report all the same
    html = tmp_path / "r.html"
    assert main(["audit", "report", str(path), "--html", str(html)]) == 1
    assert "DOES NOT VERIFY" in html.read_text()


def test_two_tables_with_one_id_and_date_stay_apart(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "floor-a").mkdir()
    (tmp_path / "floor-b").mkdir()
    a = _write(tmp_path / "floor-a", "gr-blackjack", _steps("gr-blackjack", seed=1, shoes=1))
    b = _write(tmp_path / "floor-b", "gr-blackjack", _steps("gr-blackjack", seed=4, shoes=1))
    report = build_report([a, b])
    assert report.verified, report.verdict
    assert [d.table for d in report.days] == ["BJ-3", "BJ-3"]
    assert [d.directory for d in report.days] == [str(a.parent), str(b.parent)]
    for day, path in zip(report.days, (a, b), strict=True):
        cards = sum(1 for line in path.read_text().splitlines()
                    if '"kind":"input"' in line and '"type":"card"' in line)
        assert day.cards == cards
    assert main(["audit", "verify", str(a), str(b)]) == 0
    assert "BJ-3 (" in capsys.readouterr().out  # told apart by their directories


def test_an_early_round_end_is_one_deviation_and_its_consequences_are_listed(
        tmp_path: Path) -> None:
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    cards = [i for i, s in enumerate(steps) if s.event["type"] == "card" and s.round == 2
             and s.phase not in BURN_PHASES]
    steps.insert(cards[3] + 1, Step("slip", {"type": "round_end",
                                             "t": steps[cards[3]].event["t"]}, 1, 2))
    path = _write(tmp_path, "gr-blackjack", steps)
    full = render_text(build_report([path]))
    listed = [line for line in full.splitlines() if "consequence" in line]
    assert listed and all("not counted again" in line for line in listed)
    dealt = sum(1 for s in steps if s.event["type"] == "card")
    assert _cards_in_rounds_entries(full) + _burned(full) == dealt


def test_a_shuffle_suspect_lists_its_run_of_cards(tmp_path: Path) -> None:
    # the first round of a stud day dealt from a deck only cut (JC QC KC AS 2S …): the
    # report shows, under the deviation, each card of the run that gave the order away —
    # what an auditor holds against the footage (the message only counts them)
    steps = table_day(load_profile("gr-stud-poker"), 2, DayPlan(shoes=1, table="ST-1",
                                                               start=START))
    order = iter(str(c) for c in shuffles.cut(pack(1), random.Random(0), 49))
    steps = [Step(s.phase, {**s.event, "card": next(order)}, s.shoe, s.round)
             if s.round == 1 and s.event["type"] == "card" else s for s in steps]
    path = _write(tmp_path, "gr-stud-poker", steps)
    report = build_report([path])
    lines = render_text(report).splitlines()
    at = next(i for i, line in enumerate(lines) if "! SHUFFLE_SUSPECT" in line)
    assert lines[at + 1].split(": ", 1)[1].startswith("1:JC 2:QC✓ 3:KC✓ 4:AS✓ 5:2S✓")
    (dev,) = [d for d in report.days[0].deviations if d.code == "SHUFFLE_SUSPECT"]
    run = run_text(dev.evidence)
    assert run is not None and run in render_round(report, 1)
    assert run in render_html(report)
    # a run the report cannot read (a record from a log) is left out, not a traceback
    for bad in ({}, {"run": []}, {"run": "JC"}, {"run": [{"position": "1", "card": "JC"}]},
                {"run": [{"position": 1, "card": None}]}, {"run": [None]}):
        assert run_text(bad) is None


def _rechained(path: Path, change: Any) -> None:
    """Apply ``change(record) -> bool`` to the first record it accepts and re-hash the
    chain from there: the log still verifies (an unkeyed log re-hashed whole)."""
    from test_audit_helpers import read_lines

    records = [json.loads(line) for line in read_lines(path)]
    _rechain_from(path, records, next(i for i, r in enumerate(records) if change(r)))


def _rechain_from(path: Path, recs: list[dict[str, Any]], at: int) -> Path:
    """``recs`` written to ``path`` with the chain made good again from record ``at`` (seq,
    prev and hash recomputed: a forgery without a key that the chain alone cannot tell)."""
    from test_audit_helpers import line_of, rehash

    for i in range(max(at, 1), len(recs)):
        recs[i]["seq"] = recs[i - 1]["seq"] + 1
        recs[i]["prev"] = recs[i - 1]["hash"]
        recs[i] = rehash(recs[i])
    if at == 0:
        recs[0] = rehash(recs[0])
    path.write_bytes(b"".join(line_of(r) for r in recs))
    return path


def _shoe_text(r: dict[str, Any]) -> bool:
    if r.get("kind") == "output" and isinstance(r.get("shoe"), int) and r["shoe"] > 0:
        r["shoe"] = "x"
        return True
    return False


def _card_entry_text(r: dict[str, Any]) -> bool:
    out = r.get("output") or {}
    if out.get("kind") == "round" and out["data"].get("round") == 2:
        out["data"]["cards"][0] = "JD"
        return True
    return False


@pytest.mark.parametrize(("change", "args"), [
    (_shoe_text, []),
    (_card_entry_text, ["--round", "2"]),
])
def test_a_log_that_verifies_but_holds_odd_values_is_one_line_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any,
        args: list[str]) -> None:
    # a review re-hashed logs with a shoe written as text or a round's card as a bare
    # string: verify and replay read them, the report's layout raised a traceback
    from test_audit_helpers import write_day

    path = write_day(tmp_path, dt.date(2026, 11, 21))
    _rechained(path, change)
    assert main(["audit", "verify", str(path)]) == 0
    capsys.readouterr()
    assert main(["audit", "report", "--no-progress", *args, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot lay out the log" in err and "Traceback" not in err


def test_cards_under_an_open_fault_stay_in_their_rounds_and_burns(tmp_path: Path) -> None:
    """Every input under a device fault is logged in state ``device_fault``; the engine
    still judges a card in the state the fault interrupted. The report filed those cards
    by the record's state: "53 outside a round", rounds of "0 card(s)", burns missing."""
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    load = next(i for i, s in enumerate(steps) if s.event["type"] == "shoe_loaded")
    bets = [i for i, s in enumerate(steps) if s.phase == "bets_closed"]


    def fault(at: int, kind: str) -> None:
        steps.insert(at, Step("fault", {"type": kind, "device": "shoe", "code": "jam",
                                        "t": steps[at].event["t"]}))

    # faults open over the burn, and from round 2's bets to round 4 (inserted from the end)
    fault(bets[3], "device_ok")
    fault(bets[1] + 1, "device_fault")
    fault(bets[0], "device_ok")
    fault(load + 1, "device_fault")
    path = _write(tmp_path, "gr-blackjack", steps)
    report = build_report([path])
    text = render_text(report)
    dealt = sum(1 for s in steps if s.event["type"] == "card")
    burned = sum(1 for s in steps if s.phase in BURN_PHASES)
    assert burned == 5 and f"cards {dealt} (burned {burned})" in text, text
    assert "outside a round" not in text
    assert _cards_in_rounds_entries(text) + _burned(text) == dealt
    round2 = [s for s in steps if s.event["type"] == "card" and s.round == 2
              and s.phase not in BURN_PHASES]
    one = render_round(report, 2)
    assert one is not None
    for s in round2:  # each card with its time (read under the fault)
        assert re.search(rf"{s.event['card']}\s+\S+\s+\S+\s+{_at(s.event['t'])}", one), one
    assert "DEVICE_FAULT" in one.split("deviations in this round:")[1]


def test_a_load_the_first_burn_card_implies_counts_that_card_burned(tmp_path: Path) -> None:
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    steps = [s for s in steps if s.event["type"] != "shoe_loaded"]
    path = _write(tmp_path, "gr-blackjack", steps)
    text = render_text(build_report([path]))
    dealt = sum(1 for s in steps if s.event["type"] == "card")
    assert f"cards {dealt} (burned 5)" in text and "outside a round" not in text, text
    assert "load implied" in text


def test_a_log_named_twice_is_read_once(known: tuple[Path, list[Step]],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, steps = known
    rounds = sum(1 for s in steps if s.event["type"] == "bets_closed")
    assert main(["audit", "report", str(path), str(path)]) == 0
    out, err = capsys.readouterr()
    assert f"rounds {rounds}," in out and out.count("== table BJ-3") == 1
    assert f"{path} is given more than once: read once" in err
    assert main(["audit", "replay", str(path), str(path)]) == 0
    out, err = capsys.readouterr()
    assert "1 session(s): identical" in out and "read once" in err


def test_the_view_of_a_round_names_a_forged_result_the_replay_disputes(
        known: tuple[Path, list[Step]], tmp_path: Path) -> None:
    """A round note edited and the chain re-hashed (no key, no anchors: the chain alone
    cannot tell): the view made for a disputed hand says the replay differs there."""
    path, _ = known
    recs = [json.loads(line) for line in path.read_bytes().splitlines()]
    at = next(i for i, r in enumerate(recs) if r.get("output", {}).get("kind") == "round"
              and " lose" in r["output"]["text"])
    note = recs[at]["output"]
    forged_text = note["text"].replace(" lose", " win", 1)
    note["text"] = forged_text
    forged = _rechain_from(tmp_path / "forged.jsonl", recs, at)
    report = build_report([forged])
    assert report.verified
    n = note["data"]["round"]
    text = render_round(report, n)
    assert text is not None
    assert f"REPLAY DIFFERS: seq {recs[at]['seq']} (forged.jsonl:{at + 1})" in text, text
    assert f"logged:   {forged_text}" in text
    assert "1 difference(s) between the log and a replay" in text
    other = render_round(report, n + 1)
    assert other is not None and "REPLAY DIFFERS" not in other


def test_every_deviation_in_the_text_report_names_its_rule(tmp_path: Path) -> None:
    """The rule (profile and seed paragraph) by each deviation, as `check` and the HTML
    give it: in the day's list by code, the timeline and a round's view."""
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    bets = next(i for i, s in enumerate(steps) if s.phase == "bets_closed" and s.round == 2)
    steps.insert(bets, steps.pop(bets + 1))  # a card before the bets closed
    path = _write(tmp_path, "gr-blackjack", steps)
    report = build_report([path])
    rule = load_profile("gr-blackjack").rule("dealing")
    assert rule.startswith("gr-blackjack 000 §")
    text = render_text(report)
    assert f"CARD_BEFORE_BETS_CLOSED [critical]: 1 ({rule})" in text
    assert re.search(rf"! CARD_BEFORE_BETS_CLOSED \[critical\] .* \({re.escape(rule)}\)", text)
    one = render_round(report, 2)
    assert one is not None and re.search(
        rf"seq \d+: CARD_BEFORE_BETS_CLOSED \[critical\] .* \({re.escape(rule)}\)", one)


def test_a_void_stud_hand_shows_no_rank(tmp_path: Path) -> None:
    steps = _steps("gr-stud-poker", seed=1, shoes=1)
    first = next(s for s in steps if s.event["type"] == "card" and s.event.get("to") == "P1")
    extra = "2C" if first.event["card"] != "2C" else "3C"  # (not the card read next: a
    # card read twice in a row is dealt to no hand)
    steps.insert(steps.index(first), Step("extra", {**first.event, "card": extra},
                                          first.shoe, first.round))  # a card too many: void
    path = _write(tmp_path, "gr-stud-poker", steps)
    one = render_round(build_report([path]), first.round)
    assert one is not None and "VOID" in one and "(None)" not in one, one


def test_a_rounds_view_names_its_dealer_and_its_last_hand(
        known: tuple[Path, list[Step]]) -> None:
    """What a disputed hand needs beside its cards: who dealt it (the last dealer change
    before it) and, for the shoe's last hand, when the cut card came out."""
    path, steps = known
    report = build_report([path])
    change = next(s.event for s in steps if s.event["type"] == "dealer_change")
    changed_before = next(s.round for s in steps[steps.index(next(
        s for s in steps if s.event is change)):] if s.phase == "bets_closed")
    before = render_round(report, changed_before - 1)
    after = render_round(report, changed_before)
    assert before is not None and after is not None
    assert "dealer: not recorded (no dealer change before this round)" in before
    assert f"dealer: D9 (since {_at(change['t'])})" in after
    for cut in (s for s in steps if s.event["type"] == "cut_card"):
        last = render_round(report, cut.round)
        assert last is not None
        assert (f"last hand of the shoe: the cut card came out {_at(cut.event['t'])}"
                in last), last
        assert "last hand" not in (render_round(report, cut.round - 1) or "")


def test_the_devices_at_the_table_are_listed(tmp_path: Path) -> None:
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    shoe = {"type": "device_connected", "device": "shoe", "driver": "swshoe",
            "port": "/dev/ttyUSB0", "model": "SW-SHOE-1", "serial": "SH000042",
            "firmware": "2.4.1", "t": steps[0].event["t"]}
    steps.insert(1, Step("device", shoe))
    report = build_report([_write(tmp_path, "gr-blackjack", steps)])
    text = render_text(report)
    assert "devices: 1 identified" in text
    assert (f"{_at(shoe['t'])} shoe: SW-SHOE-1 SH000042, firmware 2.4.1 on /dev/ttyUSB0"
            in text), text
    assert "SH000042" in render_html(report)
    assert re.search(r"shoe 1: \d+ round\(s\), \d+ card\(s\), \d+ burned, cut at \d+",
                     render_html(report))


def test_a_card_laid_on_a_finished_hand_is_marked_void_in_the_rounds_view(
        tmp_path: Path) -> None:
    """It was shown as an ordinary hit, and the hand's line left it out unsaid."""
    steps = _steps("gr-blackjack", seed=3, shoes=1)
    end = next(i for i, s in enumerate(steps) if s.phase == "round_end" and s.round == 2)
    dealt = [s for s in steps[:end] if s.event["type"] == "card" and s.round == 2
             and s.phase not in BURN_PHASES]
    stray = {"type": "card", "card": dealt[0].event["card"], "to": "dealer",
             "t": steps[end].event["t"]}  # a card after the dealer has finished
    steps.insert(end, Step("stray", stray, 1, 2))
    report = build_report([_write(tmp_path, "gr-blackjack", steps)])
    one = render_round(report, 2)
    assert one is not None
    rows = [line for line in one.splitlines() if re.match(r"^\s+\d+\s+\w\w\s", line)]
    assert rows[-1].split()[1:3] == [stray["card"], "dealer"]
    assert rows[-1].endswith("VOID: the hand was finished, the card not counted"), rows[-1]
    assert not any("VOID" in r for r in rows[:-1])
    assert f"; void, not counted: {stray['card']}" in one


def test_a_shufflers_discard_returns_are_counted_beside_the_rounds(tmp_path: Path) -> None:
    """Returns were in neither the timeline nor a round's view: a DISCARDS_NOT_RETURNED
    could not be held against them."""
    steps = _steps("gr-blackjack-shuffler", seed=3, shoes=1)
    returns = [s.event for s in steps if s.event["type"] == "discards_returned"]
    assert returns
    report = build_report([_write(tmp_path, "gr-blackjack-shuffler", steps)])
    text = render_text(report)
    shown = sum(int(m) for m in re.findall(r"(\d+) returned to the shuffler", text))
    assert shown == sum(e["count"] for e in returns)
    first = next(s for s in steps if s.event["type"] == "discards_returned")
    one = render_round(report, first.round)
    assert one is not None
    assert (f"discards returned to the shuffler: {first.event['count']} card(s) "
            f"({_at(first.event['t'])}, seq" in one), one


def test_the_view_of_a_round_names_its_round_note_deleted(
        known: tuple[Path, list[Step]], tmp_path: Path) -> None:
    """The note deleted and the chain re-hashed: the replay's difference is at the round's
    last input, past the bets and with no note to bound the round (a review)."""
    path, _ = known
    recs = [json.loads(line) for line in path.read_bytes().splitlines()]
    at = next(i for i, r in enumerate(recs) if r.get("output", {}).get("kind") == "round")
    n = recs[at]["output"]["data"]["round"]
    del recs[at]
    forged = _rechain_from(tmp_path / "deleted.jsonl", recs, at)
    report = build_report([forged])
    assert report.verified
    text = render_round(report, n)
    assert text is not None and "REPLAY DIFFERS" in text, text
    assert "the engine produced an output the log does not have" in text
    assert "REPLAY DIFFERS" not in (render_round(report, n + 1) or "")


def test_a_rounds_seq_names_its_file_where_the_day_has_several() -> None:
    """A day's second chain (``T1-….2.jsonl``) starts again at seq 1: a seq alone is
    ambiguous there (an auditors' review)."""
    from controller.audit.report.model import DayReport, RoundInfo
    from controller.audit.report.rounds import round_lines

    day = DayReport("T1", "2026-11-21", files=["/l/T1-2026-11-21.jsonl"])
    r = RoundInfo(3, 1, 57, "2026-11-21T10:00:00Z", file="/l/T1-2026-11-21.2.jsonl")
    assert "(seq 57)" in round_lines(day, r)[1]
    day.files.append("/l/T1-2026-11-21.2.jsonl")
    assert "(seq 57 of T1-2026-11-21.2.jsonl)" in round_lines(day, r)[1]
