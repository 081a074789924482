"""Card disclosure at the publisher, on the wire (real nats-server): under ``--disclosure
shoe`` a listener on ``shoewarden.audit.<table>`` sees no card of a shoe before the record
that ends it, and afterwards every record once, in order, as the table wrote it."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import orjson

from floor.forward import NO_SHOE_OPEN, Connection, Forwarder, HoldBack, audit_subject
from floor.options import PUBLISH_DISCLOSURES
from tests.floor_helpers import append, table_log
from tests.nats_helpers import Subscriber, stream_messages
from tests.servers import NatsServer


def blackjack_day(root: Path) -> list[bytes]:
    path = table_log(root, "BJ-01", "gr-blackjack", "gr-blackjack-day.jsonl")
    return path.read_bytes().splitlines(keepends=True)


def early_cards(received: list[bytes], written: list[bytes]) -> list[tuple[int, int]]:
    """(seq, shoe) of every card a listener has received while the table has not yet
    written the record that ends the card's shoe."""
    ended = {r["shoe"] for r in map(orjson.loads, written)
             if r.get("state") in ("shoe_complete", "closing_check", "closed")}
    return [(r["seq"], r["shoe"]) for r in map(orjson.loads, received)
            if r.get("kind") == "input" and r["event"].get("type") == "card"
            and r["shoe"] not in ended]


def received(sub: Subscriber, count: int, limit: float = 15.0) -> list[bytes]:
    """The listener's messages once it holds ``count`` of them (what the forwarder has
    published: a record published early is waited for, and seen, like any other)."""
    deadline = time.monotonic() + limit
    while len(sub.messages) < count:
        assert time.monotonic() < deadline, f"{len(sub.messages)} of {count} records arrived"
        time.sleep(0.01)
    return list(sub.messages)


def deal(lines: list[bytes], target: Path, fwd: Forwarder, sub: Subscriber,
         cuts: list[int]) -> list[tuple[int, list[tuple[int, int]]]]:
    """The table writes its day in pieces; after each, how many records the listener has
    and which cards it has seen early. A piece is taken when each of its records is
    published or held back; the listener has it when it holds every record published."""
    seen = []
    bounds = [0, *cuts, len(lines)]
    for a, b in itertools.pairwise(bounds):
        append(target, b"".join(lines[a:b]))
        deadline = time.monotonic() + 20
        while fwd.published + fwd.held < b:
            assert time.monotonic() < deadline, "the forwarder did not take the piece"
            time.sleep(0.01)
        assert fwd.published + fwd.held == b and not fwd.duplicates
        got = received(sub, fwd.published)
        seen.append((len(got), early_cards(got, lines[:b])))
    return seen


def run_day(tmp_path: Path, url: str, disclosure: str) -> tuple[
        list[bytes], list[bytes], list[tuple[int, list[tuple[int, int]]]]]:
    lines = blackjack_day(tmp_path / "source")
    target = tmp_path / "logs" / "BJ-01" / "BJ-01-2026-11-21.jsonl"
    target.parent.mkdir(parents=True)
    shoe_end = next(i for i, x in enumerate(lines)
                    if orjson.loads(x).get("state") == "shoe_complete")
    # mid-shoe 1, the shoe's last round, just past its end, mid-shoe 2
    cuts = [300, shoe_end - 5, shoe_end + 2, 700]
    fwd = Forwarder([tmp_path / "logs"], Connection([url], disclosure=disclosure))
    with Subscriber(url, audit_subject("BJ-01")) as sub:
        fwd.start()
        try:
            early = deal(lines, target, fwd, sub, cuts)
            deadline = time.monotonic() + 20
            while len(sub.messages) < len(lines) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            fwd.stop()
        return lines, list(sub.messages), early


def test_under_shoe_disclosure_no_card_leaves_the_table_before_its_shoe_ends(
        nats_server: NatsServer, tmp_path: Path) -> None:
    lines, received, steps = run_day(tmp_path, nats_server.url, "shoe")
    assert [early for _, early in steps] == [[], [], [], [], []]
    shoe_end = next(i for i, x in enumerate(lines)
                    if orjson.loads(x).get("state") == "shoe_complete")
    counts = [n for n, _ in steps]
    assert counts[0] == counts[1] < 30  # shoe 1 being dealt: nothing of it left the table
    assert counts[2] == shoe_end + 2  # its end written: the whole shoe, up to the table
    assert received == [x[:-1] for x in lines]  # then every record once, in order, unaltered
    assert [d for _, _, d in stream_messages(nats_server.url)] == received


def test_live_disclosure_sends_the_cards_as_they_come_out(
        nats_server: NatsServer, tmp_path: Path) -> None:
    lines, received, steps = run_day(tmp_path, nats_server.url, "live")
    early = [e for _, e in steps]
    assert all(early[:2]) and early[1][-1][1] == 1  # shoe 1's cards before it ended
    assert received == [x[:-1] for x in lines]


def test_the_hold_releases_at_the_record_that_ends_the_shoe(tmp_path: Path) -> None:
    lines = blackjack_day(tmp_path)
    hold = HoldBack("shoe")
    out: list[bytes] = []
    for i, line in enumerate(lines):
        got = hold.take("f", [line])
        out += [x for _, x in got]
        state = orjson.loads(line).get("state")
        if got:  # released at a record where no shoe is open, with all before it
            assert state in NO_SHOE_OPEN or state is None
            assert out == lines[:i + 1]
    assert out == lines and hold.pending == []
    assert PUBLISH_DISCLOSURES == ("live", "shoe")


def test_a_table_with_no_shoe_that_ends_publishes_live(tmp_path: Path) -> None:
    header = {"kind": "header", "seq": 1, "profile": {"card_source": "shuffler",
                                                      "shuffler": {"continuous": True}}}
    card = {"kind": "input", "seq": 2, "state": "round", "event": {"type": "card"}}
    hold = HoldBack("shoe")
    lines = [orjson.dumps(header), orjson.dumps(card)]
    assert [x for _, x in hold.take("f", lines)] == lines


def test_forward_on_the_command_line_holds_back_a_shoe_not_ended(
        nats_server: NatsServer, tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.floor_helpers import ROOT

    lines = blackjack_day(tmp_path / "source")
    target = tmp_path / "logs" / "BJ-01" / "BJ-01-2026-11-21.jsonl"
    target.parent.mkdir(parents=True)
    append(target, b"".join(lines[:300]))  # a table that went offline mid-shoe
    run = [sys.executable, "-m", "controller", "forward", "--logs", str(tmp_path / "logs"),
           "--publish", nats_server.url, "--disclosure", "shoe"]
    r = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=60)
    sent = stream_messages(nats_server.url)
    assert r.returncode == 0, r.stderr
    assert f"{len(sent)} record(s) published" in r.stdout
    assert f"{300 - len(sent)} held back until their shoe ends" in r.stdout
    assert 0 < len(sent) < 30 and [d for _, _, d in sent] == [x[:-1] for x in lines[:len(sent)]]
