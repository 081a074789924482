"""Casino stud poker referee (003 §4, §6–7, §10β–γ): card counts, void hands, the result.

A round is: ``bets_closed`` with ``players``, the deal (five cards each, one at a time,
to P1 … Pn from the dealer's left and then the dealer, whose fifth card is face up),
the dealer's ``stub_count`` of the cards left in hand, ``round_end``.

* ``stub_count`` must be 52 − 5 × (players + 1) (003 §4); otherwise ``DEAL_COUNT``
  at once. A round that ends without a stub count is ``DEAL_COUNT`` ("stub not
  counted"): §4 makes the count part of every deal.
* When cards are read, each hand's cards are counted at ``round_end``. A card with
  ``to`` ("P3", "dealer") counts for that hand; a card without one is placed by its
  position in the dealing order. A player with other than five cards has that hand
  void (§10β); a dealer with other than five voids every player's hand (§10γ). Both
  are one ``DEAL_COUNT`` naming the void hands and every hand's count.
* The round note shows every hand with its cards and rank, whether the dealer
  qualifies (ace-king or better, §6α) and each player's result against the dealer in
  units of the ante, *assuming the player raised* (folds are not events; a player who
  folded lost the ante, §5α).

Exactly one ``Note("round")`` per round, from :meth:`StudReferee.end`.
"""

from __future__ import annotations

import re
from typing import Any

from mypy_extensions import mypyc_attr

from controller.deviations import Deviation
from controller.events import MAX_SEATS, BetsClosed, CardDrawn
from controller.outputs import Note, Output, consequence
from controller.poker import HandValue, dealer_qualifies, evaluate, settle
from controller.profiles import Profile
from controller.rounds import CardLedger, DeviationFactory, register_referee

DECK = 52
HAND_SIZE = 5
DEALER = "dealer"
_SEAT = re.compile(r"^P0*([1-9]\d*)$", re.IGNORECASE)


def hand_name(to: str) -> str:
    """Canonical hand name: ``"P3"`` (any case, leading zeros dropped), ``"dealer"``;
    anything else is kept as given (a card to somewhere that is not a hand)."""
    text = to.strip()
    if text.lower() == DEALER:
        return DEALER
    m = _SEAT.match(text)
    return f"P{int(m.group(1))}" if m else text


def expected_stub(players: int, pack: int = DECK) -> int:
    """003 §4: the cards left in the dealer's hand after five to each player and himself
    (``pack``: the cards the table deals from — one deck, unless it opened with more,
    which is flagged once as ``DECK_COUNT``, not again at every round's stub)."""
    return pack - HAND_SIZE * (players + 1)


def dealing_order(players: int) -> list[str]:
    """One round of the deal: P1 … Pn from the dealer's left, then the dealer."""
    return [f"P{i}" for i in range(1, players + 1)] + [DEALER]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)  # (as CardLedger)
class StudReferee(CardLedger):
    """Counts a stud round's cards, voids hands dealt the wrong number, shows the result."""

    def __init__(self, profile: Profile, make: DeviationFactory) -> None:
        super().__init__(profile, make)
        self.qualify_rule = profile.stud.dealer_qualifies if profile.stud else "ace-king"
        self.raise_multiple = profile.stud.raise_multiple if profile.stud else 2
        self._clear()

    def _clear(self) -> None:
        self.drawn: list[tuple[str, str | None]] = []  # (card, event.to) in dealing order
        self.exposed: list[bool] = []
        self.stubs: list[int] = []
        self.stub_at = 0  # the cards read when the stub was last counted
        self.stub_flagged = False  # a stub check raised DEAL_COUNT this round

    # ------------------------------------------------------------------ the seam

    def begin(self, round_no: int, bets: BetsClosed) -> list[Output]:
        out = super().begin(round_no, bets)
        self._clear()
        return out

    def card(self, event: CardDrawn) -> list[Output]:
        out = super().card(event)
        self.drawn.append((str(event.card), event.to))
        self.exposed.append(event.exposed)
        return out

    def stub_count(self, count: int) -> list[Output]:
        out = super().stub_count(count)
        self.stubs.append(count)
        self.stub_at = read = len(self.drawn)
        players, how = self._players()
        pack = self.pack
        if players is not None:
            expected = expected_stub(players, pack)
            if count != expected:
                dealt = pack - count
                should = pack - expected
                diff = dealt - should
                what = (f"{diff} card(s) too many dealt" if diff > 0
                        else f"{-diff} card(s) too few dealt")
                out.append(self.make(
                    "DEAL_COUNT",
                    f"stub counted {count}, expected {expected} = {pack} − 5 × ({players} "
                    f"player(s) + dealer): {what} (003 §4)",
                    check="stub", count=count, expected=expected, players=players,
                    players_from=how, cards_read=read))
        elif not any(expected_stub(p, pack) == count for p in range(1, pack // HAND_SIZE)):
            out.append(self.make(
                "DEAL_COUNT",
                f"stub counted {count}: no number of players leaves that many cards "
                f"({pack} − 5 × (players + dealer)) (003 §4)",
                check="stub", count=count, expected=None, players=None, players_from=None,
                cards_read=read))
        elif read and read + count != pack:
            # the players are not known, but the cards read were dealt from the pack (one
            # deck, 003 §1): what is left of it is the pack less them
            out.append(self.make(
                "DEAL_COUNT",
                f"stub counted {count} after {read} card(s) read: {read + count}, not the "
                f"deck's {pack} (003 §4)",
                check="stub", count=count, expected=pack - read, players=None,
                players_from=None, cards_read=read))
        self.stub_flagged = self.stub_flagged or any(
            isinstance(o, Deviation) and o.code == "DEAL_COUNT" for o in out)
        return out

    def complete(self) -> bool:
        """No card is due: the players are known from the bets, five cards went to each and
        to the dealer, and the stub was counted after them (003 §4)."""
        bets = self.bets
        if bets is None or bets.players is None or not self.stubs:
            return False
        n = len(self.drawn)
        return n == HAND_SIZE * (bets.players + 1) and self.stub_at == n

    def end(self) -> list[Output]:
        base = super().end()
        out: list[Output] = [o for o in base if not (isinstance(o, Note) and o.kind == "round")]
        data: dict[str, Any] = {}
        for o in base:
            if isinstance(o, Note) and o.kind == "round":
                data = dict(o.data)
        data.setdefault("round", self.round_no)
        players, how = self._players()
        data["players"] = players
        if how != "bets_closed":
            data["players_from"] = how
        expected = expected_stub(players, self.pack) if players is not None else None
        data["stub"] = {"count": self.stubs[-1] if self.stubs else None, "expected": expected}
        if not self.stubs:
            out.append(self.make(
                "DEAL_COUNT",
                f"round {self.round_no} ended without the stub count"
                + (f" (expected {expected})" if expected is not None else "")
                + ": the dealer must count the cards left after the deal (003 §4)",
                check="stub", count=None, expected=expected, players=players,
                players_from=how, cards_read=len(self.drawn), why="stub not counted"))
        elif self.stub_at < len(self.drawn) and not self.stub_flagged:
            after = [card for card, _ in self.drawn[self.stub_at:]]
            out.append(self.make(
                "DEAL_COUNT",
                f"round {self.round_no}: the stub was counted before the deal was over "
                f"({', '.join(after)} dealt after it): the dealer counts the cards left "
                "after dealing (003 §4)",
                check="stub", count=self.stubs[-1], expected=expected, players=players,
                players_from=how, cards_read=self.stub_at, why="counted before the deal ended",
                dealt_after=after))
        owners = self._owners(players)
        data["cards"] = [
            {"card": card, "to": owner, "why": "exposed" if exposed else "deal"}
            for (card, _), owner, exposed in zip(self.drawn, owners, self.exposed, strict=True)
        ]
        text = f"round {self.round_no}: {len(self.drawn)} cards"
        if players is not None and self.drawn:
            dev, text = self._judge(players, owners, data)
            if dev is not None and self.stub_flagged and self.stubs \
                    and self.stub_at + self.stubs[-1] == self.pack:
                # the stub, counted right after the deal, already showed the cards dealt
                # too many or too few (DEAL_COUNT then): the hand they made void is that
                # slip's (a review: two criticals for one card too many)
                out.append(consequence(dev, "DEAL_COUNT"))
            elif dev is not None:
                out.append(dev)
        elif not self.drawn:
            text += " (cards not read: hands not shown)"
        out.append(Note("round", text, data))
        return out

    # ------------------------------------------------------------------ internals

    def _players(self) -> tuple[int | None, str | None]:
        """The number of players: from ``bets_closed``, else from the cards (the highest
        seat named by ``to``, or whole rounds of the deal), else unknown."""
        if self.bets is not None and self.bets.players is not None:
            return self.bets.players, "bets_closed"
        # (a seat beyond any table's, MAX_SEATS, is no player: the hands are built per seat,
        # and "P99999999999999999999" on one card ran the machine out of memory — a review)
        seats = [seat for _, to in self.drawn if to is not None
                 for m in [_SEAT.match(to.strip())] if m
                 for seat in [int(m.group(1))] if seat <= MAX_SEATS]
        n = len(self.drawn)
        top = max(seats) if seats else 0
        if top and all(to is not None and to.strip() for _, to in self.drawn):
            return top, "cards"  # every card names its hand: the highest seat named
        # some cards (or none) name their hand: whole rounds of the deal, unless a seat
        # beyond them is named (one card named P1 of a two-player deal says nothing more)
        if n >= 2 * HAND_SIZE and n % HAND_SIZE == 0:
            return max(n // HAND_SIZE - 1, top), "cards"
        if top:
            return top, "cards"
        return None, None

    def _owners(self, players: int | None) -> list[str]:
        """Whose hand each card went to: its ``to``, else its place in the dealing order."""
        order = dealing_order(players) if players else None
        owners = []
        for i, (_, to) in enumerate(self.drawn):
            if to is not None and to.strip():
                owners.append(hand_name(to))
            elif order is not None:
                owners.append(order[i % len(order)])
            else:
                owners.append("round")
        return owners

    def _order(self, seats: list[str], owners: list[str]) -> Deviation | None:
        """003 §4 deals the five cards "one at a time": in each of the five turns of the
        deal every hand gets one card (in whatever order the seats are taken). Judged where
        every card names its hand and every hand has five (else DEAL_COUNT says more)."""
        m = len(seats)
        for turn in range(HAND_SIZE):
            got = owners[turn * m:(turn + 1) * m]
            if sorted(got) != sorted(seats):
                twice = sorted({h for h in got if got.count(h) > 1})
                return self.make(
                    "DEAL_ORDER",
                    f"round {self.round_no}: turn {turn + 1} of the deal gave "
                    f"{', '.join(twice)} a second card before every hand had one: the cards "
                    f"go one at a time to each player and the dealer (003 §4)",
                    turn=turn + 1, cards=[f"{c} to {o}" for (c, _), o in
                                          zip(self.drawn[turn * m:(turn + 1) * m], got,
                                              strict=True)],
                    order=owners)
        return None

    def _judge(self, players: int, owners: list[str],
               data: dict[str, Any]) -> tuple[Any, str]:
        seats = dealing_order(players)
        cards: dict[str, list[str]] = {h: [] for h in seats}
        stray: dict[str, list[str]] = {}
        for (card, _), owner in zip(self.drawn, owners, strict=True):
            (cards if owner in cards else stray).setdefault(owner, []).append(card)
        counts = {h: len(c) for h, c in cards.items()}
        dealer_wrong = counts[DEALER] != HAND_SIZE
        wrong = [h for h in seats[:-1] if counts[h] != HAND_SIZE]
        void = seats[:-1] if dealer_wrong else wrong
        dev = None
        if dealer_wrong or wrong or stray:
            parts = []
            if dealer_wrong:
                parts.append(f"the dealer has {counts[DEALER]} card(s), not 5: every hand is "
                             f"void (003 §10γ)")
            if wrong:
                listed = ", ".join(f"{h} {counts[h]}" for h in wrong)
                if dealer_wrong:
                    parts.append(f"also wrong: {listed}")
                else:
                    parts.append(f"{listed} card(s), not 5: "
                                 f"{'that hand is' if len(wrong) == 1 else 'those hands are'} "
                                 f"void (003 §10β)")
            if stray:
                listed = ", ".join(f"{len(c)} to {h}" for h, c in stray.items())
                parts.append(f"card(s) to no hand in play ({listed})")
            dev = self.make(
                "DEAL_COUNT", f"round {self.round_no}: " + "; ".join(parts),
                check="hands", void=list(void), counts=counts, dealer=counts[DEALER],
                players=players, stray={h: list(c) for h, c in stray.items()},
                assigned="to" if all(to for _, to in self.drawn) else (
                    "dealing order" if all(to is None for _, to in self.drawn) else "mixed"))
        if dev is None and all(to for _, to in self.drawn):
            dev = self._order(seats, owners)
        values: dict[str, HandValue] = {
            h: evaluate(c) for h, c in cards.items() if len(c) == HAND_SIZE}
        dealer_value = values.get(DEALER)
        qualifies = (dealer_qualifies(dealer_value, self.qualify_rule)
                     if dealer_value is not None else None)
        hands: dict[str, Any] = {}
        for h, c in cards.items():
            entry: dict[str, Any] = {"cards": c, "count": len(c),
                                     "rank": values[h].name if h in values else None,
                                     "void": h in void}
            if h == DEALER:
                entry["up_card"] = c[HAND_SIZE - 1] if len(c) >= HAND_SIZE else None
                entry["qualifies"] = qualifies
            hands[h] = entry
        results: dict[str, Any] = {}
        for h in seats[:-1]:
            if h in void:
                results[h] = {"outcome": "void"}
            elif dealer_value is not None and h in values:
                results[h] = settle(values[h], dealer_value, self.raise_multiple,
                                    self.qualify_rule).to_record()
        data.update({
            "hands": hands, "dealer_qualifies": qualifies, "results": results,
            "void": list(void), "raise_assumed": True,
        })
        if stray:
            data["stray"] = {h: list(c) for h, c in stray.items()}
        text = f"round {self.round_no}: {players} player(s), {len(self.drawn)} cards; "
        if dealer_value is None:
            text += f"dealer {counts[DEALER]} card(s): every hand void"
        else:
            text += (f"dealer {' '.join(cards[DEALER])} {dealer_value.name}, "
                     + ("qualifies" if qualifies else "does not qualify"))
        for h in seats[:-1]:
            r = results.get(h)
            if r is None:
                continue
            if r["outcome"] == "void":
                text += f"; {h} void ({counts[h]} cards)" if not dealer_wrong else ""
                continue
            text += (f"; {h} {values[h].name}: {r['outcome']} "
                     f"(ante {r['ante']:+d}, raise {r['raise']:+d})")
        return dev, text


register_referee("stud-poker", StudReferee)
