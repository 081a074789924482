"""The pty host: the step list drives the devices; every card dealt equals the script; the
console channel orders the dealer's console events against the device messages; real ptys
opened with pyserial; a disconnect and reconnect; the subprocess mode.

A small reference controller lives here (messages → input events as docs/protocol.md's
table says, merged with the console by :class:`ConsoleMerger`): replaying a day through it
must give back exactly the step list.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import serial

from controller.app.sequencing import ConsoleMerger
from controller.cards import pack
from controller.deviations import Deviation
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile, profile_names
from drivers.framing import Frame, FrameDecoder, encode
from drivers.protocol import Kind
from simulators.dealer import DayPlan, Step, table_day
from simulators.devices import Device
from simulators.pty_host import PtyHost, TablePlayer, make_devices
from simulators.scenario import load_scenario, scenario_names

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- reference side


class Mapper:
    """Device messages → input events (docs/protocol.md "From messages to input events")."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.scan: list[str] = []

    def __call__(self, f: Frame) -> dict[str, Any] | None:
        b, k, dev = f.body(), f.type, self.device
        if k in (Kind.CARD_OUT, Kind.DELIVERED):
            if b.get("unreadable"):
                return {"type": "device_fault", "device": dev, "code": "UNREADABLE_CARD"}
            return {"type": "card", "card": b["card"]}
        simple = {Kind.CUT_CARD_OUT: {"type": "cut_card"}, Kind.SHUFFLE_DONE: {"type": "shuffle"},
                  Kind.SHOE_EMPTY: {"type": "device_fault", "device": dev, "code": "SHOE_EMPTY"},
                  Kind.JAM: {"type": "device_fault", "device": dev, "code": "JAM"},
                  Kind.JAM_CLEARED: {"type": "device_ok", "device": dev, "code": "JAM"}}
        if k in simple:
            return simple[k]
        if k == Kind.DOOR:
            return {"type": "device_fault" if b["open"] else "device_ok", "device": dev,
                    "code": "DOOR_OPEN"}
        if k in (Kind.FAULT, Kind.FAULT_CLEARED):
            return {"type": "device_fault" if k == Kind.FAULT else "device_ok", "device": dev,
                    "code": b["code"]}
        if k == Kind.SCAN_BEGIN:
            self.scan = []
        elif k == Kind.SCAN_CARD:
            self.scan.append(b.get("card", "??"))
        elif k == Kind.SCAN_END:
            return {"type": "deck_check", "cards": self.scan}
        elif k == Kind.DISCARDS_ACCEPTED:
            return {"type": "discards_returned", "count": b["count"]}
        elif k == Kind.DECK_CHECK:
            return {"type": "deck_check", "cards": b["cards"]}
        return None


def replay_models(player: TablePlayer, devices: dict[str, Device],
                  until: float = 120.0) -> tuple[list[dict[str, Any]], ConsoleMerger]:
    """Play the whole day into the device models, tick them on simulated time and merge
    what they send with the console lines, as a bench would."""
    for d in devices.values():
        d.receive(encode(0, Kind.HELLO, {}), 0.0)
    merger = ConsoleMerger()
    while not player.done:
        for line in player.play_next():
            merger.console_line(line)
    mappers = {n: Mapper(n) for n in devices}
    decoders = {n: FrameDecoder() for n in devices}
    now = 0.0
    while now < until:
        for n, d in devices.items():
            for f in decoders[n].feed(d.tick(now)):
                if isinstance(f, Frame) and (ev := mappers[n](f)) is not None:
                    merger.device_event(n, ev)
            if d.link_down is not None:
                d.link_reset()
                d.receive(encode(0, Kind.HELLO, {}), now)
        if now > 1.0 and all(d.idle() for d in devices.values()):
            break
        now = round(now + 0.05, 2)
    for line in player.notes():
        merger.console_line(line)
    return merger.ready(), merger


def engine_codes(profile: str, events: list[dict[str, Any]]) -> Counter[str]:
    engine = TableEngine(load_profile(profile))
    out: Counter[str] = Counter()
    for ev in events:
        for o in engine.handle(parse_event(ev)):
            if isinstance(o, Deviation):
                out[o.code] += 1
    return out


def card_events(steps: list[Step]) -> list[str]:
    return [s.event["card"] for s in steps if s.event["type"] == "card"]


# --------------------------------------------------------------------------- pure player


@pytest.mark.parametrize("name", profile_names())
def test_devices_deal_exactly_the_scripted_cards_and_replay_gives_the_day(name: str) -> None:
    p = load_profile(name)
    steps = table_day(p, 21, DayPlan(shoes=1, rounds_per_block=8))
    devices = make_devices(p, seed=21)
    player = TablePlayer(p, steps, devices)
    events, merger = replay_models(player, devices)
    dealer = "shuffler" if p.shuffler_mode else "shoe"
    assert player.dealt[dealer] == card_events(steps)  # none lost, none duplicated
    assert player.mismatches == []
    assert merger.ended and merger.waiting_for() == {}
    assert events == [s.event for s in steps]  # order, content and attached fields


def test_console_lines_one_per_step_with_counts() -> None:
    p = load_profile("gr-baccarat-two-tableaux")
    steps = table_day(p, 2, DayPlan(shoes=2))
    devices = make_devices(p, seed=2)
    player = TablePlayer(p, steps, devices)
    lines = []
    while not player.done:
        lines += player.play_next()
    assert [ln["n"] for ln in lines] == list(range(len(lines)))
    assert [ln["step"] for ln in lines[:-1]] == list(range(len(steps)))
    assert lines[-1]["end"] is True and "event" not in lines[-1]
    kinds = Counter(ln.get("device", "console") for ln in lines[:-1])
    assert kinds["scanner"] == 3 and kinds["shuffler"] == 2
    assert kinds["shoe"] == len(card_events(steps)) + 2  # cards and two cut cards
    for prev, ln in itertools.pairwise(lines):
        grew = {d for d in ln["after"] if ln["after"][d] > prev["after"][d]}
        assert grew == ({ln["device"]} if "device" in ln else set()), ln
    check = next(ln for ln in lines if ln.get("phase") == "new_pack_check")
    assert check["attach"]["deck_lots"][0]["id"] == "LOT-B"  # the wire cannot carry lots
    assert all(ln["event"]["type"] not in ("card", "deck_check") for ln in lines if "event" in ln)


def test_hand_shuffle_is_a_console_event() -> None:
    p = load_profile("gr-blackjack")
    devices = make_devices(p, seed=1, shuffler="none")
    assert set(devices) == {"shoe", "scanner"}
    steps = table_day(p, 1, DayPlan(shoes=1))
    events, _ = replay_models(TablePlayer(p, steps, devices), devices)
    assert events == [s.event for s in steps]


def test_devices_per_card_source() -> None:
    assert set(make_devices(load_profile("gr-blackjack-shuffler"))) == {"scanner", "shuffler"}
    assert set(make_devices(load_profile("gr-stud-poker"))) == {"shoe", "scanner", "shuffler"}
    devs = make_devices(load_profile("gr-blackjack"), seed=4)
    assert devs["shuffler"].identity.model == "SW-SHUF-B1"
    assert make_devices(load_profile("gr-blackjack"), seed=4)["shuffler"].rng.random() == \
        devs["shuffler"].rng.random()


def _replayable(name: str) -> bool:
    sc = load_scenario(name)
    return all(f.layer == "content" or f.kind in ("jam", "door") for f in sc.faults)


@pytest.mark.parametrize("name", [n for n in scenario_names() if _replayable(n)])
def test_scenario_expectations_through_the_reference_controller(name: str) -> None:
    sc = load_scenario(name)
    p = load_profile(sc.profile or "")
    steps = sc.steps(p, sc.seed or 0)
    devices = make_devices(p, seed=sc.seed, scenario=sc, shuffler=sc.host.get("shuffler", "auto"))
    events, merger = replay_models(TablePlayer(p, steps, devices), devices)
    assert merger.ended
    codes = engine_codes(p.name, events)
    if any(f.time is not None for f in sc.faults):
        assert set(codes) <= set(sc.expect), codes  # timing decides; never anything else
    else:
        assert set(codes) == set(sc.expect), codes


def test_unshuffled_pack_is_dealt_in_load_order() -> None:
    sc = load_scenario("unshuffled-pack")
    p = load_profile("gr-stud-poker")
    steps = sc.steps(p, sc.seed or 0)
    devices = make_devices(p, seed=sc.seed, scenario=sc)
    player = TablePlayer(p, steps, devices)
    replay_models(player, devices)
    wrong = {steps[i].round for i, _, _ in player.mismatches}
    assert wrong == {3}  # the third shuffle's round only
    dealt = [got for _, _, got in player.mismatches]
    deck = [str(c) for c in pack(1)]
    start = deck.index(dealt[0])
    assert dealt == (deck[start:] + deck[:start])[:len(dealt)]  # new-deck order, cut


# --------------------------------------------------------------------------- merger


def test_merger_waits_for_the_device_messages_before_a_console_event() -> None:
    m = ConsoleMerger()
    m.console_line({"n": 0, "after": {"shoe": 0}, "event": {"type": "bets_closed"}})
    m.console_line({"n": 1, "after": {"shoe": 1}, "device": "shoe", "attach": {"t": "T"}})
    m.console_line({"n": 2, "after": {"shoe": 1}, "event": {"type": "round_end"}})
    assert m.ready() == [{"type": "bets_closed"}]
    assert m.waiting_for() == {"shoe": 1}
    m.device_event("shoe", {"type": "device_fault", "code": "SILENT"}, counted=False)
    assert m.ready() == [{"type": "device_fault", "code": "SILENT"}]  # passed on at once
    m.device_event("shoe", {"type": "card", "card": "7H"})
    assert m.ready() == [{"type": "card", "card": "7H", "t": "T"}, {"type": "round_end"}]
    m.console_line({"n": 3, "after": {"shoe": 3}, "end": True})
    m.device_event("shoe", {"type": "device_fault", "code": "JAM"})
    assert m.ready() == [] and not m.ended
    m.device_event("shoe", {"type": "device_ok", "code": "JAM"})
    assert m.ready() == [{"type": "device_fault", "code": "JAM"},
                         {"type": "device_ok", "code": "JAM"}] and m.ended


def test_merger_stops_waiting_for_an_abandoned_device() -> None:
    m = ConsoleMerger()
    m.console_line({"n": 0, "after": {"shoe": 1, "shuffler": 1}, "event": {"type": "cut"}})
    m.device_event("shoe", {"type": "card", "card": "AS"})
    assert m.ready() == [] and m.waiting_for() == {"shuffler": 1}
    m.abandon("shuffler")  # refused by the allowlist: its shuffle will never come
    assert m.ready() == [{"type": "card", "card": "AS"}, {"type": "cut"}]
    m.device_event("shuffler", {"type": "shuffle"})
    assert m.ready() == [{"type": "shuffle"}]


def test_host_allowlist_is_the_configured_identities() -> None:
    host = PtyHost("gr-blackjack", 1, scenario="wrong-identity")
    entries = {e["kind"]: e for e in host.allowlist()}
    assert entries["shuffler"]["serial"] == "SB000001"  # not the SB999999 it will report
    assert set(entries) == {"shoe", "scanner", "shuffler"}
    assert all(e["firmware_hash"].startswith("sha256:") for e in entries.values())


def test_merger_attach_goes_to_the_steps_last_message() -> None:
    m = ConsoleMerger()
    m.console_line({"n": 0, "after": {"shoe": 3}, "device": "shoe", "attach": {"to": "P1"}})
    for ev in ({"type": "device_fault"}, {"type": "device_ok"}, {"type": "card", "card": "AS"}):
        m.device_event("shoe", ev)
    assert m.ready()[-1] == {"type": "card", "card": "AS", "to": "P1"}


# --------------------------------------------------------------------------- real ptys


class Client:
    """A minimal controller on the host's ports: pyserial for the devices, the FIFO for the
    console."""

    def __init__(self, ports: dict[str, str]) -> None:
        self.ports = ports
        self.devices = [n for n in ports if n != "console"]
        self.serial: dict[str, serial.Serial | None] = {}
        self.decoders: dict[str, FrameDecoder] = {}
        self.frames: dict[str, list[Frame]] = {n: [] for n in self.devices}
        self.mappers = {n: Mapper(n) for n in self.devices}
        self.merger = ConsoleMerger()
        self.events: list[dict[str, Any]] = []
        self.lost: Counter[str] = Counter()
        self.console = os.open(ports["console"], os.O_RDONLY | os.O_NONBLOCK)
        self.cbuf = b""
        self.lines: list[dict[str, Any]] = []
        for n in self.devices:
            self.connect(n)

    def connect(self, name: str) -> None:
        self.serial[name] = serial.serial_for_url(self.ports[name], exclusive=True, timeout=0)
        self.decoders[name] = FrameDecoder()
        self.serial[name].write(encode(0, Kind.HELLO, {"controller": "test"}))  # type: ignore

    def pump(self) -> None:
        for n in self.devices:
            port = self.serial[n]
            if port is None:
                continue
            try:
                data = port.read(65536)
            except serial.SerialException:
                self.lost[n] += 1
                port.close()
                self.serial[n] = None
                continue
            for f in self.decoders[n].feed(data):
                if isinstance(f, Frame):
                    self.frames[n].append(f)
                    if (ev := self.mappers[n](f)) is not None:
                        self.merger.device_event(n, ev)
        with contextlib.suppress(BlockingIOError):
            self.cbuf += os.read(self.console, 65536)
        *full, self.cbuf = self.cbuf.split(b"\n")
        for raw in full:
            line = json.loads(raw)
            self.lines.append(line)
            self.merger.console_line(line)
        self.events += self.merger.ready()

    def until(self, cond: Callable[[], bool], timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump()
            if cond():
                return
            time.sleep(0.001)
        raise AssertionError(f"timed out; waiting for {self.merger.waiting_for()}")

    def close(self) -> None:
        for port in self.serial.values():
            if port is not None:
                port.close()
        os.close(self.console)

    def cards(self, name: str) -> list[str]:
        return [f.body()["card"] for f in self.frames[name]
                if f.type in (Kind.CARD_OUT, Kind.DELIVERED)]


@pytest.mark.parametrize(("profile", "plan"), [
    ("gr-blackjack", DayPlan(shoes=1)),
    ("gr-blackjack-shuffler", DayPlan(shoes=1, rounds_per_block=10)),
])
def test_pty_host_serves_a_whole_day(profile: str, plan: DayPlan) -> None:
    host = PtyHost(profile, 7, plan=plan).start()
    try:
        ports = host.ports
        assert set(ports) == {*host.devices, "console"}
        assert all(os.path.realpath(p).startswith("/dev/pts/") for n, p in ports.items()
                   if n != "console")
        client = Client(ports)
        with pytest.raises(serial.SerialException):  # exclusive: a second opener is refused
            serial.serial_for_url(ports[next(iter(host.devices))], exclusive=True)
        client.until(lambda: client.merger.ended, 20.0)
        dealer = "shuffler" if load_profile(profile).shuffler_mode else "shoe"
        assert client.cards(dealer) == card_events(host.steps)
        assert client.events == [s.event for s in host.steps]
        for n in client.devices:
            seqs = [f.seq for f in client.frames[n]]
            assert seqs == list(range(len(seqs)))  # no gap, no repeat
            assert [Kind(f.type).name for f in client.frames[n][:2]] == ["ACK", "IDENTITY"]
        assert host.done.is_set() and client.lines == host.console_lines
        client.close()
    finally:
        host.stop()
    assert not Path(ports["shoe" if "shoe" in ports else "shuffler"]).exists()


def test_pty_host_disconnect_and_reconnect(tmp_path: Path) -> None:
    sc = tmp_path / "unplug.toml"
    sc.write_text('name = "unplug"\nexpect = []\n[host]\npace = 0.002\n'
                  '[[fault]]\nkind = "disconnect"\ndevice = "shoe"\ncard = 8\nseconds = 0.3\n')
    host = PtyHost("gr-blackjack", 3, plan=DayPlan(shoes=1), scenario=str(sc),
                   link_dir=tmp_path / "links").start()
    try:
        path = host.ports["shoe"]
        client = Client(host.ports)
        client.until(lambda: client.lost["shoe"] == 1)  # the read fails: unplugged
        assert len(client.cards("shoe")) == 7
        assert not os.path.exists(path)  # gone while unplugged
        client.until(lambda: os.path.exists(path), 3.0)
        # a new pty (the kernel may give it the freed number again)
        assert host.links["shoe"].generation == 2 and os.path.realpath(path).startswith("/dev/pts/")
        before = len(client.frames["shoe"])
        client.connect("shoe")  # the driver reopens the same path
        client.until(lambda: client.merger.ended, 20.0)
        again = client.frames["shoe"][before:]
        assert [(f.seq, Kind(f.type).name) for f in again[:2]] == [(0, "ACK"), (1, "IDENTITY")]
        assert client.cards("shoe") == card_events(host.steps)  # nothing lost, nothing twice
        notes = [ln for ln in client.lines if ln.get("note") == "link"]
        assert [ln["state"] for ln in notes] == ["down", "up"]
        assert notes[1]["pts"] == os.path.realpath(path)
        assert client.events == [s.event for s in host.steps]
        client.close()
    finally:
        host.stop()


def test_pty_host_waits_for_hello_and_console_reader() -> None:
    host = PtyHost("gr-stud-poker", 1, plan=DayPlan(shoes=1, rounds_per_block=2)).start()
    try:
        time.sleep(0.2)
        assert not host.playing.is_set()
        client = Client(host.ports)
        client.until(lambda: client.merger.ended)
        assert host.playing.is_set()
        client.close()
    finally:
        host.stop()


def test_subprocess_prints_ports_and_exits_cleanly_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulators.pty_host", "--profile", "gr-stud-poker", "--seed",
         "1", "--shoes", "1", "--rounds-per-block", "2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ports = json.loads(proc.stdout.readline())
        assert set(ports) == {"shoe", "scanner", "shuffler", "console"}
        assert all(os.path.exists(p) for p in ports.values())
        client = Client(ports)
        client.until(lambda: client.merger.ended)
        assert len(client.cards("shoe")) == len([e for e in client.events if e["type"] == "card"])
        client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert not any(os.path.exists(p) for p in ports.values())
        assert proc.stdout.read() == ""  # one line only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_subprocess_reports_a_bad_scenario() -> None:
    out = subprocess.run([sys.executable, "-m", "simulators.pty_host", "--profile",
                          "gr-chemin-de-fer", "--scenario", "dealer-mistakes"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and out.stdout == ""
    assert "dealer-mistakes.toml: mistake[1].kind: profile gr-chemin-de-fer burns no cards" \
        in out.stderr


def test_a_person_s_day_leaves_a_gap_when_another_device_speaks() -> None:
    """``--dealer person``: run reads each device on its own thread, so the scanner's count
    and the shuffler's shuffle played microseconds apart could reach it in either order
    (seen as CHECK_MISSING in the example end-to-end test under load). The next device
    speaks only after a gap; the same device's steps follow each other at the pace."""
    import io

    from simulators import pty_host

    steps = [Step("open", {"type": "table_open"}), Step("count", {"type": "deck_check"}),
             Step("shuffle", {"type": "shuffle"}), Step("card", {"type": "card"}),
             Step("card", {"type": "card"})]
    routes = {"table_open": None, "deck_check": "scanner", "shuffle": "shuffler",
              "card": "shoe"}
    played: list[tuple[str, float]] = []

    class Player:
        i = 0

        @property
        def done(self) -> bool:
            return self.i >= len(steps)

        def device_for(self, step: Step) -> str | None:
            return routes[step.event["type"]]

    class Host:
        stopping = False

        def __init__(self) -> None:
            self.steps, self.player = steps, Player()

        def step(self, n: int) -> None:
            played.append((steps[self.player.i].event["type"], time.monotonic()))
            self.player.i += n

    out = io.StringIO()
    pty_host.play_for_a_person(Host(), io.StringIO("\n"), out, 0)  # type: ignore[arg-type]
    assert [k for k, _ in played] == ["table_open", "deck_check", "shuffle", "card", "card"]
    t = dict(enumerate(at for _, at in played))
    gap = getattr(pty_host, "DEVICE_SWITCH_GAP", 0.1)
    assert t[2] - t[1] >= gap  # scanner, then shuffler
    assert t[3] - t[2] >= gap  # shuffler, then shoe
    assert t[4] - t[3] < gap  # the shoe again: no gap
    assert "step 1/5 (table_open): type at the dealer console" in out.getvalue()
