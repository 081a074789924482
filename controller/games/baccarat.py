"""Baccarat-family referee: Banco Punto, live baccarat, chemin de fer, two-tableaux baccarat.

The tableau (``profile.baccarat.tableau``) decides what is checked:

* ``punto-banco`` (001 BP §9–13, 002 §2 3.4–3.5): Punto, Banco, Punto, Banco; a natural
  (8 or 9 on either side after two cards) stops the deal; Punto draws on 0–5 and stands
  on 6–7 (§10); Banco draws by its total and Punto's third card value v (§11; §12 is read
  as the stand half of §11, its Punto/Banco names swapped by the drafting); when Punto
  stood, Banco draws on 0–5 (002 §2 3.5.1 iii).
* ``chemin-de-fer`` (001 §8): the player (Punto here) draws on 0–4, has the option on 5,
  stands on 6–7; the bank (Banco here) draws on 0–2 (§8στ), on 3 unless v is 8 (v 9:
  option, §8δ), on 4 against 2–7, on 5 against 5–7 (v 4: option, §8δ), on 6 against 6–7,
  stands on 7; when the player stood the bank draws on 5 (§8η) and stands on 6 (§8ζ), and
  on 3–4 draws (interpretation: a total below a 5 that must draw must draw too). An
  option declined is recorded with the ``stand`` action; options are logged, never flagged.
* ``none`` (two-tableaux baccarat): cards are recorded; no draw is checked, no result.

A card beyond the tableau is ``DRAW_RULE`` when it arrives; a required card that never
came is ``DRAW_RULE`` at ``round_end``; a ``stand`` recorded where the side must draw is
``DRAW_RULE`` at once. At most one ``DRAW_RULE`` per round: after the first, the round is
recorded but no longer judged.

Which hand a card goes to: the first four by position (002 §2 3.4.3: first and third to
the player, second and fourth to the banker). A third card goes to the side named by the
card event's ``to`` (``punto``/``player``/``p``, ``banco``/``banker``/``bank``/``b``) when
given. Without one it goes to the side whose turn it is, read so that a correctly dealt
round is always read correctly: while Punto has not finished (no third card, no
``stand``), a card is Punto's when Punto may draw; when Punto must stand it is Banco's if
Banco may draw, otherwise Punto's (dealing order). After that it is Banco's while Banco
has two cards, and beyond that the hand with fewer cards (Punto on a tie).

Exposed cards (001 BP §5): ``EXPOSED_CARD`` (info) for every exposed card; with
``exposed_card.handling = "use"`` it is played as if dealt normally (``burn``: it is put
aside and the next card takes its place). An exposed *first* card of a round with
``exposed_card.first_card_of_round = "dummy-round"`` also gives ``DUMMY_HAND`` (info): the
round is completed and judged as usual, but bets are not accepted.

Shoe passing (001 BP §15, where ``baccarat.shoe_passing``): the shoe starts with seat 1 in
every shoe (a referee lives for one shoe); a Punto win passes it to the next seat on the
right (seat + 1, after the profile's ``baccarat.seats`` back to 1); a Banco win and an
Egalite keep it.

Exactly one ``Note("round")`` per round, from :meth:`BaccaratReferee.end`, with the cards
in dealing order (which hand, and why), both totals, the naturals, the winner, ``dummy``
and, where tracked, ``shoe_holder`` ``{"before", "after"}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr

from controller.cards import baccarat_value
from controller.events import BetsClosed, CardDrawn
from controller.outputs import Note, Output
from controller.profiles import BaccaratRule, Profile
from controller.rounds import CardLedger, DealtCard, DeviationFactory, register_referee

PUNTO = "punto"
BANCO = "banco"
DRAW = "draw"
STAND = "stand"
OPTION = "option"

_SIDE_NAMES = {
    "punto": PUNTO, "player": PUNTO, "p": PUNTO,
    "banco": BANCO, "banker": BANCO, "bank": BANCO, "b": BANCO,
}
_WINNER = {PUNTO: "Punto", BANCO: "Banco"}
_TITLE = {PUNTO: "Punto", BANCO: "Banco"}


def total(values: list[int]) -> int:
    """A hand's total: the last digit of the sum of its values (001 BP §13, 002 §2 1.1)."""
    return sum(values) % 10


# ---------------------------------------------------------------------------- tableaux


def punto_banco_punto(two_card_total: int) -> str:
    """001 BP §10, 002 §2 3.5.1 ii, iv: Punto draws on 0–5, stands on 6–7."""
    return DRAW if two_card_total <= 5 else STAND


def punto_banco_banco(two_card_total: int, third: int | None) -> str:
    """001 BP §11–12, 002 §2 3.5.1 iii, v: Banco by its total and Punto's third card."""
    t = two_card_total
    if third is None:
        return DRAW if t <= 5 else STAND
    if t <= 2:
        return DRAW
    if t == 3:
        return STAND if third == 8 else DRAW
    if t == 4:
        return DRAW if 2 <= third <= 7 else STAND
    if t == 5:
        return DRAW if 4 <= third <= 7 else STAND
    if t == 6:
        return DRAW if third in (6, 7) else STAND
    return STAND


def chemin_player(two_card_total: int) -> str:
    """001 §8α: 0–4 always draws, 5 may draw or not, 6–7 never draws."""
    if two_card_total <= 4:
        return DRAW
    return OPTION if two_card_total == 5 else STAND


def chemin_banker(two_card_total: int, third: int | None) -> str:
    """001 §8β–η: the bank by its total and the player's third card ("gives")."""
    t = two_card_total
    if third is None:
        # §8η: 5 must draw; §8ζ: 6 stands; §8στ: 0–2 draw; 3–4 draw (interpretation: the
        # profile's bank_stood_3_4 = "draw"; chemin_banker_3_4_option for "option").
        return DRAW if t <= 5 else STAND
    if t <= 2:
        return DRAW
    if t == 3:
        return STAND if third == 8 else (OPTION if third == 9 else DRAW)
    if t == 4:
        return DRAW if 2 <= third <= 7 else STAND
    if t == 5:
        return DRAW if 5 <= third <= 7 else (OPTION if third == 4 else STAND)
    if t == 6:
        return DRAW if third in (6, 7) else STAND
    return STAND


def chemin_banker_3_4_option(two_card_total: int, third: int | None) -> str:
    """:func:`chemin_banker`, but the bank on 3 or 4 when the player stood has the option:
    001 §8 names 0–2 (στ) and 5 (η) as draws and leaves 3–4 unstated (the profile's
    ``baccarat.bank_stood_3_4 = "option"``)."""
    if third is None and two_card_total in (3, 4):
        return OPTION
    return chemin_banker(two_card_total, third)


Rule = Callable[[int], str]
BankRule = Callable[[int, int | None], str]

TABLEAUX: dict[str, tuple[Rule, BankRule]] = {
    "punto-banco": (punto_banco_punto, punto_banco_banco),
    "chemin-de-fer": (chemin_player, chemin_banker),
}


def tableau_of(rule: BaccaratRule) -> tuple[Rule, BankRule]:
    """The player's and the bank's rule of a profile's ``[baccarat]`` (its tableau, and
    for chemin de fer how the bank on 3–4 plays when the player stood)."""
    player, banker = TABLEAUX[rule.tableau]
    if rule.tableau == "chemin-de-fer" and rule.bank_stood_3_4 == "option":
        banker = chemin_banker_3_4_option
    return player, banker


# ---------------------------------------------------------------------------- the referee


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)  # (as CardLedger)
class BaccaratReferee(CardLedger):
    """Checks a baccarat-family round against the profile's tableau; lays out the result."""

    def __init__(self, profile: Profile, make: DeviationFactory) -> None:
        super().__init__(profile, make)
        rule = profile.baccarat
        self.tableau = rule.tableau if rule is not None else "none"
        self.shoe_passing = bool(rule.shoe_passing) if rule is not None else False
        self.seats = rule.seats if rule is not None else 12  # (shoe passing, 001 BP §15)
        # the player's and the bank's rule (with no tableau nothing asks them: no draw is
        # checked)
        self._player, self._banker = (tableau_of(rule) if rule is not None
                                      and rule.tableau != "none" else TABLEAUX["punto-banco"])
        self.holder = 1  # 001 BP §9: the first seated player on the croupier's right
        self._clear()

    def _clear(self) -> None:
        self.hands: dict[str, list[int]] = {PUNTO: [], BANCO: []}
        self.hand_cards: dict[str, list[str]] = {PUNTO: [], BANCO: []}
        self.stood: dict[str, bool] = {PUNTO: False, BANCO: False}
        self.flagged = False
        self.out_of_order = False  # DEAL_ORDER raised in this round (once a round)
        self.dummy = False
        self.options: list[dict[str, Any]] = []
        self.decided: set[str] = set()  # sides whose option was logged
        self.pending: list[Output] = []  # option notes found while placing a card

    # ------------------------------------------------------------------ the seam

    def begin(self, round_no: int, bets: BetsClosed) -> list[Output]:
        out = super().begin(round_no, bets)
        self._clear()
        return out

    def card(self, event: CardDrawn) -> list[Output]:
        out: list[Output] = []
        card = str(event.card)
        if event.exposed:
            handling = self.profile.exposed_card
            first = not self.cards
            side_hint = "burn" if handling.handling == "burn" else None
            out.append(self.make(
                "EXPOSED_CARD",
                f"{card} came out face up in round {self.round_no}"
                + (": burned" if side_hint else ": used, play continues"),
                card=card, round=self.round_no, position=len(self.cards) + 1,
                handling=handling.handling, first=first))
            if first and handling.first_card_of_round == "dummy-round":
                self.dummy = True
                out.append(self.make(
                    "DUMMY_HAND",
                    f"round {self.round_no}: the first card {card} was exposed; the round is "
                    "completed as a dummy hand, bets are not accepted",
                    card=card, round=self.round_no))
            if side_hint:
                self.cards.append(DealtCard(card, "burn", "exposed"))
                return out
        if self.tableau == "none":
            why = "exposed" if event.exposed else "deal"
            self.cards.append(DealtCard(card, event.to or "round", why))
            return out
        side, why, problem = self._place(event)
        if self.pending:
            out.extend(self.pending)
            self.pending = []
        self.hands[side].append(baccarat_value(event.card))
        self.hand_cards[side].append(card)
        self.cards.append(DealtCard(card, side, "exposed" if event.exposed else why))
        if problem == "order":
            if not self.out_of_order:
                self.out_of_order = True
                out.append(self._out_of_order(card, side))
        elif problem is not None:
            out.append(self._flag(side, problem, card=card))
        if self.tableau == "chemin-de-fer":  # (an option is chemin de fer's alone)
            out.extend(self._option_drawn(side))
        return out

    def action(self, action: str) -> list[Output]:
        if action != STAND or self.tableau == "none" or self.flagged:
            return []
        side = self._turn()
        if side is None:
            return []  # during the deal, after a natural, or after both sides finished
        self.stood[side] = True
        rule = self._rule(side)
        if rule == DRAW:
            return [self._flag(side, "stood", card=None)]
        if rule == OPTION:
            return self._option(side, STAND, recorded=True)
        return []

    def dealing(self) -> bool:
        """Fewer than the four cards every hand deals (a burned exposed card aside)."""
        if self.tableau == "none":
            return sum(c.why != "exposed" or c.to != "burn" for c in self.cards) < 4
        return not self._dealt_four()

    def complete(self) -> bool:
        """No card is due: the four are dealt and each side has drawn or stood as the
        tableau says (a natural ends the hand). A side whose rule leaves it an option (chemin
        de fer) is done only once it stood or drew; a round already flagged against the
        tableau, or dealt with no tableau, is not known to be complete."""
        if self.tableau == "none" or self.flagged or not self._dealt_four():
            return False
        if self._naturals():
            return True
        for side in (PUNTO, BANCO):
            if len(self.hands[side]) == 2 and not self.stood[side] \
                    and self._rule(side) != STAND:
                return False
        return True

    def end(self) -> list[Output]:
        out: list[Output] = []
        n = len(self.hands[PUNTO]) + len(self.hands[BANCO])
        if self.tableau != "none" and not self.flagged and n:
            out.extend(self._check_end())
        data: dict[str, Any] = {
            "round": self.round_no,
            "cards": [{"card": c.card, "to": c.to, "why": c.why} for c in self.cards],
            "tableau": self.tableau,
        }
        p, b = self.hands[PUNTO], self.hands[BANCO]
        winner: str | None = None
        if self.tableau == "none":
            data.update(punto=None, banco=None, naturals=[], winner=None)
        else:
            pt = total(p) if p else None
            bt = total(b) if b else None
            if len(p) >= 2 and len(b) >= 2:
                pf, bf = total(p), total(b)
                winner = "Egalite" if pf == bf else ("Punto" if pf > bf else "Banco")
            data.update(punto=pt, banco=bt, naturals=self._naturals(), winner=winner)
        data["dummy"] = self.dummy
        if self.tableau == "chemin-de-fer":
            data["options"] = list(self.options)
        if self.shoe_passing:
            before = self.holder
            if winner == "Punto":
                self.holder = self.holder % self.seats + 1
            data["shoe_holder"] = {"before": before, "after": self.holder}
        out.append(Note("round", self._text(data), data))
        return out

    # ------------------------------------------------------------------ reading the round

    def _two(self, side: str) -> int:
        return total(self.hands[side][:2])

    def _naturals(self) -> list[str]:
        """Sides with 8 or 9 on their first two cards, once the four cards are dealt."""
        if not self._dealt_four():
            return []
        return [s for s in (PUNTO, BANCO) if self._two(s) >= 8]

    def _dealt_four(self) -> bool:
        return len(self.hands[PUNTO]) >= 2 and len(self.hands[BANCO]) >= 2

    def _third(self) -> int | None:
        """Punto's third card value (v), or None when Punto has not drawn one."""
        p = self.hands[PUNTO]
        return p[2] if len(p) >= 3 else None

    def _rule(self, side: str) -> str:
        if side == PUNTO:
            return self._player(self._two(PUNTO))
        return self._banker(self._two(BANCO), self._third())

    def _punto_done(self) -> bool:
        return len(self.hands[PUNTO]) >= 3 or self.stood[PUNTO]

    def _turn(self) -> str | None:
        """The side to act after the deal of four: Punto, then Banco; None when no one."""
        if not self._dealt_four() or self._naturals():
            return None
        if not self._punto_done():
            return PUNTO
        if len(self.hands[BANCO]) == 2 and not self.stood[BANCO]:
            return BANCO
        return None

    def _place(self, event: CardDrawn) -> tuple[str, str, str | None]:
        """(side, why, problem) for the next card; problem names a DRAW_RULE ("order": a
        DEAL_ORDER, the card laid where ``to`` says), or None."""
        p, b = self.hands[PUNTO], self.hands[BANCO]
        hint = None if event.to is None else _SIDE_NAMES.get(event.to.strip().lower())
        if len(p) < 2 or len(b) < 2:  # (the deal of four: most cards)
            side = PUNTO if len(p) <= len(b) else BANCO
            if hint is not None and hint != side and len(self.hands[hint]) < 2:
                # laid where it went; out of order only where the game has an order to
                # break (001 BP §9, 002 §2 3.4.3: §8 gives chemin de fer none)
                return hint, "deal", "order" if self.tableau == "punto-banco" else None
            return side, "deal", None
        if self.flagged:
            return hint or self._fallback(), "third", None
        if self._naturals():
            return hint or self._fallback(), "third", "natural"
        turn = self._turn()
        if turn == PUNTO:
            prule = self._rule(PUNTO)
            if hint == BANCO:
                if prule == DRAW:
                    return BANCO, "third", "punto-missing"
                self.stood[PUNTO] = True  # Punto stood without a recorded stand
                if prule == OPTION:
                    self.pending.extend(self._option(PUNTO, STAND, recorded=False))
                return BANCO, "third", (None if self._rule(BANCO) != STAND else "drew")
            if prule in (DRAW, OPTION):
                return PUNTO, "third", None
            if hint is None and self._banco_may_draw_alone():
                self.stood[PUNTO] = True
                return BANCO, "third", None
            return PUNTO, "third", "drew"
        if turn == BANCO:
            if hint == PUNTO:
                return PUNTO, "third", "extra"
            return BANCO, "third", ("drew" if self._rule(BANCO) == STAND else None)
        side = hint or self._fallback()
        return side, "third", "extra"

    def _banco_may_draw_alone(self) -> bool:
        return self._banker(self._two(BANCO), None) != STAND

    def _fallback(self) -> str:
        """A card nobody may take: Punto's third slot first, then the hand with fewer cards."""
        p, b = len(self.hands[PUNTO]), len(self.hands[BANCO])
        return PUNTO if p <= b else BANCO

    def _check_end(self) -> list[Output]:
        if not self._dealt_four():
            p, b = self.hands[PUNTO], self.hands[BANCO]
            side = PUNTO if len(p) <= len(b) else BANCO
            return [self._flag(side, "deal-incomplete", card=None)]
        if self._naturals():
            return []
        out: list[Output] = []
        for side in (PUNTO, BANCO):
            if len(self.hands[side]) >= 3 or self.stood[side]:
                continue
            rule = self._rule(side)
            if rule == DRAW:
                out.append(self._flag(side, "missing", card=None))
                return out
            if rule == OPTION:
                out.extend(self._option(side, STAND, recorded=False))
        return out

    # ------------------------------------------------------------------ options

    def _option_drawn(self, side: str) -> list[Output]:
        """A third card taken on an option (the rule before it was drawn)."""
        if self.tableau != "chemin-de-fer" or self.flagged or len(self.hands[side]) != 3:
            return []
        if self._rule(side) != OPTION:
            return []
        return self._option(side, DRAW, recorded=True)

    def _option(self, side: str, choice: str, recorded: bool) -> list[Output]:
        if side in self.decided:
            return []
        self.decided.add(side)
        against = self._third() if side == BANCO else None
        entry = {"side": side, "total": self._two(side), "against": against,
                 "choice": choice, "recorded": recorded}
        self.options.append(entry)
        who = "player" if side == PUNTO else "bank"
        vs = f" against {against}" if against is not None else ""
        how = "" if recorded else " (no stand recorded: taken as declined)"
        text = (f"round {self.round_no}: option, the {who} on {entry['total']}{vs} "
                f"{'draws' if choice == DRAW else 'stands'}{how}")
        return [Note("option", text, {"round": self.round_no, **entry})]

    def _out_of_order(self, card: str, side: str) -> Output:
        """001 BP §9, 002 §2 3.4.3: the first four cards go Punto, Banco, Punto, Banco; the
        reader (``to``) saw this one go to the other hand. The card is laid where it went,
        so the hands and the tableau are judged as dealt."""
        dealt = [c.card for c in self.cards if c.why == "deal"]
        # (no paragraph in the text: the rule cited beside it is the profile's, 001 BP §9
        # or 002 §2 3.4.3 — not one game's in another's)
        return self.make(
            "DEAL_ORDER",
            f"round {self.round_no}: {card} dealt to {_TITLE[side]} as card {len(dealt)} of "
            "the deal: the first four go Punto, Banco, Punto, Banco",
            round=self.round_no, card=card, to=side,
            position=len(dealt), deal=dealt)

    # ------------------------------------------------------------------ DRAW_RULE

    def _flag(self, side: str, problem: str, card: str | None) -> Output:
        self.flagged = True
        name = _TITLE[side]
        p2 = self._two(PUNTO) if len(self.hands[PUNTO]) >= 2 else None
        b2 = self._two(BANCO) if len(self.hands[BANCO]) >= 2 else None
        third = self._third()
        total_now = p2 if side == PUNTO else b2
        against = f" against Punto's third card {third}" if side == BANCO and \
            third is not None else ""
        if side == BANCO and third is None and len(self.hands[PUNTO]) >= 2 and \
                problem in ("drew", "missing", "stood"):
            against = " (Punto stood)"
        should = STAND
        if problem == "natural":
            nat = " and ".join(_TITLE[s] for s in self._naturals())
            message = (f"{card} drawn for {name} after a natural ({nat} "
                       f"{'/'.join(str(self._two(s)) for s in self._naturals())}): no card "
                       "may follow a natural")
        elif problem == "drew":
            message = f"{card} drawn for {name} on {total_now}{against}: {name} must stand"
        elif problem == "extra":
            message = f"{card} drawn for {name}: a card beyond the tableau"
        elif problem == "punto-missing":
            should = DRAW
            message = (f"{card} drawn for Banco before Punto's third card: Punto must draw on "
                       f"{p2}")
            side, card = PUNTO, None
        elif problem == "stood":
            should = DRAW
            message = f"stand recorded for {name} on {total_now}{against}: {name} must draw"
        elif problem == "missing":
            should = DRAW
            message = f"{name} stood on {total_now}{against}: {name} must draw a third card"
        else:  # deal-incomplete
            should = DRAW
            dealt = len(self.hand_cards[PUNTO]) + len(self.hand_cards[BANCO])
            message = (f"round ended after {dealt} card(s): the deal of two cards each was not "
                       "completed")
        return self.make(
            "DRAW_RULE", f"round {self.round_no}: {message}",
            round=self.round_no, side=side, problem=problem, should=should, card=card,
            cards=[c.card for c in self.cards],
            punto_cards=list(self.hand_cards[PUNTO]), banco_cards=list(self.hand_cards[BANCO]),
            punto_total=p2, banco_total=b2, punto_third=third, tableau=self.tableau)

    # ------------------------------------------------------------------ the note

    def _text(self, data: dict[str, Any]) -> str:
        head = f"round {self.round_no}: {len(self.cards)} cards"
        if self.tableau == "none":
            return head + " (no tableau: draws not checked)"
        if data["winner"] is None:
            return head + " (incomplete deal)" if self.cards else head + " (not dealt)"
        text = f"{head}, Punto {data['punto']} – Banco {data['banco']}: "
        text += "Egalite" if data["winner"] == "Egalite" else f"{data['winner']} wins"
        if data["naturals"]:
            text += " (natural " + ", ".join(_TITLE[s] for s in data["naturals"]) + ")"
        if self.dummy:
            text += "; dummy hand, bets not accepted"
        if "shoe_holder" in data:
            h = data["shoe_holder"]
            text += (f"; shoe stays with seat {h['after']}" if h["before"] == h["after"]
                     else f"; shoe passes from seat {h['before']} to seat {h['after']}")
        return text


for _game in ("baccarat", "chemin-de-fer", "baccarat-two-tableaux"):
    register_referee(_game, BaccaratReferee)
