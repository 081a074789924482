"""The simulated dealer's table day played through device models: which device plays each step.

:class:`TablePlayer` is pure (no I/O): one step per :meth:`TablePlayer.play_next`, which
makes the device models act (scan, shuffle, draw, …) and returns the console lines to
write. The host (:mod:`simulators.pty_host.host`) moves the bytes; this module decides
what they say, so it can be tested without a pty.
"""

from __future__ import annotations

import random
import secrets
from collections import Counter
from typing import Any

from controller.cards import pack
from controller.profiles import Profile
from drivers.protocol import Identity
from simulators import shuffles
from simulators.dealer import Step
from simulators.devices import (
    BatchShuffler,
    ContinuousShuffler,
    Device,
    Scanner,
    ScriptedOrder,
    Shoe,
    default_identity,
)
from simulators.scenario import Scenario

# event fields a device message carries; the rest of a step's event goes in "attach"
CARRIED = {"card": {"type", "card"}, "deck_check": {"type", "cards"}, "shuffle": {"type"},
           "cut_card": {"type"}, "discards_returned": {"type", "count"}}


def make_devices(profile: Profile, *, seed: int | None = None, scenario: Scenario | None = None,
                 shuffler: str = "auto") -> dict[str, Device]:
    """The devices a table of ``profile`` has: shoe (not with a continuous shuffler), scanner,
    and a shuffler (continuous for ``card_source = "shuffler"``, else batch unless
    ``shuffler == "none"``). Each gets its scenario faults and identity overrides and, with a
    seed, its own seeded ``random.Random``."""
    classes: dict[str, type[Device]] = {}
    if profile.shuffler_mode:
        classes = {"scanner": Scanner, "shuffler": ContinuousShuffler}
    else:
        classes = {"shoe": Shoe, "scanner": Scanner}
        if shuffler != "none":
            classes["shuffler"] = BatchShuffler
    out: dict[str, Device] = {}
    for name, cls in classes.items():
        conf = dict(scenario.devices.get(name, {})) if scenario else {}
        base = default_identity(cls.model_key)
        identity = Identity(base.kind, conf.get("model") or base.model,
                            conf.get("serial") or base.serial,
                            conf.get("firmware") or base.firmware,
                            conf.get("firmware_hash") or base.firmware_hash)
        rng = random.Random(f"{seed}:{name}") if seed is not None else secrets.SystemRandom()
        out[name] = cls(identity, heartbeat=conf.get("heartbeat", 1.0), rng=rng, name=name,
                        faults=scenario.faults_for(name) if scenario else ())
    return out


def _rotate(cards: list[str], offset: int) -> list[str]:
    """The pack after a cut ``offset`` cards deep (the top ``offset`` go under)."""
    if not cards:
        return cards
    k = offset % len(cards)
    return cards[k:] + cards[:k]


class TablePlayer:
    """Plays a step list through device models (no I/O): one step per :meth:`play_next`,
    which returns the console lines to write."""

    def __init__(self, profile: Profile, steps: list[Step], devices: dict[str, Device]) -> None:
        self.profile = profile
        self.steps = steps
        self.devices = devices
        self.continuous = profile.shuffler_mode
        opens = [s.event["decks"] for s in steps if s.event["type"] == "table_open"]
        self.decks = opens[0] if opens else profile.decks.max
        self.pack = [str(c) for c in pack(self.decks)]
        self.i = 0
        self.n = 0
        self.dealt: dict[str, list[str]] = {name: [] for name in devices}
        self.mismatches: list[tuple[int, str, str | None]] = []
        self._pending: tuple[list[str], int] | None = None  # batch-shuffled pack and its cut
        self._shoe_segment: int | None = None
        self._segment_of: list[int] = []
        self._segment_cards: dict[int, list[str]] = {}
        self._index: dict[int, int] = {}  # card step -> its position in its segment
        #: the shoe's cards as drawn since the last shuffle, by round, each with its hand
        #: where the game tells them (-1: none): the discards the dealer collects
        self._rounds: list[tuple[list[str], list[int]]] = []
        self._round: list[str] = []
        bounds = {"shuffle", "discards_returned"} if self.continuous else {"shuffle",
                                                                            "shoe_loaded"}
        seg = -1
        for i, s in enumerate(steps):
            if s.event["type"] in bounds:
                seg = i
            self._segment_of.append(seg)
            if s.event["type"] == "card":
                cards = self._segment_cards.setdefault(seg, [])
                self._index[i] = len(cards)
                cards.append(s.event["card"])

    @property
    def done(self) -> bool:
        return self.i >= len(self.steps)

    def _complete(self, first: list[str]) -> list[str]:
        """``first``, then the rest of the pack (pack order)."""
        rest = Counter(self.pack) - Counter(first)
        tail = []
        for c in self.pack:
            if rest[c] > 0:
                tail.append(c)
                rest[c] -= 1
        return list(first) + tail

    def _cards_from(self, i: int) -> list[str]:
        """The cards of step ``i``'s segment from step ``i`` on."""
        seg = self._segment_of[i]
        cards = self._segment_cards.get(seg, [])
        if i in self._index:
            return cards[self._index[i]:]
        # a boundary step: the segment's cards are all still to come
        return cards

    def _after(self) -> dict[str, int]:
        return {name: d.events_emitted for name, d in self.devices.items()}

    def line(self, **body: Any) -> dict[str, Any]:
        out = {"n": self.n, **body}
        out.setdefault("after", self._after())
        self.n += 1
        return out

    def notes(self) -> list[dict[str, Any]]:
        """Console note lines for the faults the devices fired since the last call."""
        out = []
        for d in self.devices.values():
            for note in d.notes:
                out.append(self.line(note="fault", fault=note))
            d.notes.clear()
        return out

    def play_next(self) -> list[dict[str, Any]]:
        if self.done:
            return []
        i = self.i
        self.i += 1
        step = self.steps[i]
        ev = step.event
        kind = ev["type"]
        device = self._play(i, step)
        if device is None:
            body: dict[str, Any] = {"step": i, "phase": step.phase, "event": ev}
        else:
            body = {"step": i, "phase": step.phase, "device": device}
            attach = {k: v for k, v in ev.items() if k not in CARRIED[kind]}
            if attach:
                body["attach"] = attach
        lines = [*self.notes(), self.line(**body)]
        if self.done:
            lines.append(self.line(end=True, cards=self.cards_out()))
        return lines

    def cards_out(self) -> dict[str, list[str]]:
        """Every card each dealing device reported leaving it, in order ("??" unreadable;
        an injected foreign card included): what a controller's log must account for."""
        return {name: list(d.cards_out) for name, d in self.devices.items() if d.cards_out}

    def device_for(self, step: Step) -> str | None:
        """The device that plays ``step`` (None: the dealer console), as :meth:`_play`
        routes it — without playing it."""
        kind, d = step.event["type"], self.devices
        if kind == "deck_check" and "scanner" in d:
            return "scanner"
        if kind == "shuffle" and "shuffler" in d:
            return "shuffler"
        if kind == "card":
            return "shuffler" if self.continuous else "shoe"
        if kind == "cut_card" and "shoe" in d:
            return "shoe"
        if kind == "discards_returned" and self.continuous:
            return "shuffler"
        return None

    def _play(self, i: int, step: Step) -> str | None:
        ev = step.event
        kind = ev["type"]
        d = self.devices
        if kind == "deck_check" and "scanner" in d:
            d["scanner"].scan(ev["cards"], expected=self.decks * 52)  # type: ignore[attr-defined]
            return "scanner"
        if kind == "shuffle" and "shuffler" in d:
            sh = d["shuffler"]
            if self.continuous:
                if len(sh.stack) != len(self.pack):  # type: ignore[attr-defined]
                    sh.eject()  # type: ignore[attr-defined]
                    sh.load(self.pack)  # type: ignore[attr-defined]
                sh.shuffle(ScriptedOrder(self._complete(self._cards_from(i))))  # type: ignore
            else:
                if "shoe" in d:  # the discards and the stub, as collected, go in first
                    sh.take_discards(self._collected(d["shoe"]))  # type: ignore[attr-defined]
                cards, offset = self._next_shoe(i)
                n = len(self.pack)
                post = self._complete(cards)
                k = offset % n if n else 0
                pre = post[n - k:] + post[:n - k]  # so that cutting at `offset` gives `post`
                sh.eject()  # type: ignore[attr-defined]
                sh.load(self.pack)  # type: ignore[attr-defined]
                sh.shuffle(ScriptedOrder(pre))  # type: ignore[attr-defined]
                self._pending = (sh.eject(), offset)  # type: ignore[attr-defined]
            return "shuffler"
        if kind == "card":
            want = ev["card"]
            if self.continuous:
                sh = d["shuffler"]
                if not sh.stack:  # type: ignore[attr-defined]  # never shuffled (a mistake)
                    sh.load(self._complete(self._cards_from(i)))  # type: ignore
                got = sh.deliver()  # type: ignore[attr-defined]
                name = "shuffler"
            else:
                shoe = d["shoe"]
                if self._shoe_segment != self._segment_of[i]:
                    self._shoe_segment = self._segment_of[i]
                    if self._pending is not None:
                        cards, offset = self._pending
                        self._pending = None
                        shoe.load(_rotate(cards, offset))  # type: ignore[attr-defined]
                    else:
                        shoe.load(self._complete(self._cards_from(i)))  # type: ignore
                got = shoe.draw()  # type: ignore[attr-defined]
                name = "shoe"
                if got is not None:
                    self._round.append(got)
            if got is not None:
                self.dealt[name].append(got)
            if got != want:
                self.mismatches.append((i, want, got))
            return name
        if kind == "round_end" and self._round:
            labels = list(step.hands or ())
            if len(labels) > len(self._round):  # (a card lost on the way: one pile)
                labels = []
            self._rounds.append((self._round,
                                 [-1] * (len(self._round) - len(labels)) + labels))
            self._round = []
            return None
        if kind == "cut_card" and "shoe" in d:
            d["shoe"].cut_card_out()  # type: ignore[attr-defined]
            return "shoe"
        if kind == "discards_returned" and self.continuous:
            sh = d["shuffler"]
            out = sh.out  # type: ignore[attr-defined]
            count = ev["count"]
            # the last `count` delivered go back; the burns before them may stay in the
            # discard holder (001 BP §20δ(3): the profile's [shuffler] burns_returned)
            back = out[len(out) - count:] if 0 <= count <= len(out) else None
            sh.accept_discards(back,  # type: ignore[attr-defined]
                               rng=ScriptedOrder(self._complete(self._cards_from(i))))
            return "shuffler"
        return None

    def _collected(self, shoe: Device) -> list[str]:
        """The last shoe's discards as the dealer collects them (002 §2 3.6, §3 3.6:
        :func:`simulators.shuffles.collected`, each hand whole in the order dealt), then the
        cards the shoe still holds; forgotten once taken."""
        rounds = self._rounds + ([(self._round, [-1] * len(self._round))] if self._round
                                 else [])
        self._rounds, self._round = [], []
        return shuffles.collected([r for r, _ in rounds], [h for _, h in rounds],
                                  list(shoe.stack))  # type: ignore[attr-defined]

    def _next_shoe(self, i: int) -> tuple[list[str], int]:
        """The cards dealt between shuffle step ``i`` and the next shuffle, and the offset
        of the first cut among them (0 if none)."""
        cards: list[str] = []
        offset = None
        loaded = False
        for s in self.steps[i + 1:]:
            t = s.event["type"]
            if t == "shuffle" or (t == "shoe_loaded" and loaded):
                break  # the next shoe (its shuffle may be missing: a dealer mistake)
            loaded = loaded or t == "shoe_loaded"
            if t == "cut" and offset is None:
                offset = s.event.get("offset", 0)
            elif t == "card":
                cards.append(s.event["card"])
        return cards, offset or 0
