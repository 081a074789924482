"""Baccarat-family rounds, dealt by the book (PROCEDURES.md §4).

Punto, Banco, Punto, Banco, then the third cards by the profile's tableau:

* ``punto-banco`` (001 BP §9–13, 002 §2 3.4–3.5): no options.
* ``chemin-de-fer`` (001 §8): the player's 5 and the bank's 3-against-9 and
  5-against-4 are options (and the bank's 3–4 when the player stood, where the profile's
  ``bank_stood_3_4`` is ``option``), taken at random; a declined option is recorded with
  ``{"type": "action", "action": "stand"}``.
* ``none`` (two-tableaux baccarat, no tableau in the seed): two cards to each of the two
  player tableaux and the bank, then a third card to each at random.

The rules are written out here again, apart from the referee's
(controller/games/baccarat.py), so that whole simulated days cross-check it.
Baccarat has no boxes: :meth:`BaccaratRounds.bets` is a bare ``bets_closed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from controller.cards import Card
from simulators.dealer import Step
from simulators.games import RoundDealer, register

# Draw ("D"), stand ("S") or option ("O") for the bank's two-card total (row) against
# the player's third card: column 0 = the player stood, columns 1–10 = third card 0–9.
_PUNTO_BANCO_BANK = {
    0: "DDDDDDDDDDD", 1: "DDDDDDDDDDD", 2: "DDDDDDDDDDD",
    3: "DDDDDDDDDSD", 4: "DSSDDDDDDSS", 5: "DSSSSDDDDSS",
    6: "SSSSSSSDDSS", 7: "SSSSSSSSSSS",
}
_CHEMIN_BANK = {
    0: "DDDDDDDDDDD", 1: "DDDDDDDDDDD", 2: "DDDDDDDDDDD",
    3: "DDDDDDDDDSO", 4: "DSSDDDDDDSS", 5: "DSSSSODDDSS",
    6: "SSSSSSSDDSS", 7: "SSSSSSSSSSS",
}
_CHEMIN_BANK_3_4_OPTION = {  # the profile's bank_stood_3_4 = "option": 3–4 when the player
    **_CHEMIN_BANK,           # stood are the bank's choice
    3: "O" + _CHEMIN_BANK[3][1:], 4: "O" + _CHEMIN_BANK[4][1:],
}
_PUNTO_BANCO_PLAYER = "DDDDDDSS"  # two-card total 0–7
_CHEMIN_PLAYER = "DDDDDOSS"


def _value(card: Card) -> int:
    return 0 if card.rank in "TJQK" else "A23456789".index(card.rank) + 1


class BaccaratRounds(RoundDealer):
    def bets(self) -> dict[str, Any]:
        return {"type": "bets_closed"}

    def _card(self, phase: str) -> Iterator[Step]:
        yield from self.day.draw(phase)
        self.last = _value(self.day.last_card)

    def _decide(self, rule: str) -> bool:
        if rule == "O":
            return self.rng.random() < 0.5
        return rule == "D"

    def deal(self) -> Iterator[Step]:
        tableau = self.day.profile.baccarat.tableau  # type: ignore[union-attr]
        if tableau == "none":
            yield from self._two_tableaux()
            return
        chemin = tableau == "chemin-de-fer"
        players = _CHEMIN_PLAYER if chemin else _PUNTO_BANCO_PLAYER
        bank = _CHEMIN_BANK if chemin else _PUNTO_BANCO_BANK
        if chemin and self.day.profile.baccarat.bank_stood_3_4 == "option":  # type: ignore[union-attr]
            bank = _CHEMIN_BANK_3_4_OPTION
        punto: list[int] = []
        banco: list[int] = []
        for hand in (punto, banco, punto, banco):
            yield from self._card("deal")
            hand.append(self.last)
        p, b = sum(punto) % 10, sum(banco) % 10
        if p >= 8 or b >= 8:
            return  # a natural: no more cards
        column = 0
        rule = players[p]
        if self._decide(rule):
            yield from self._card("third")
            column = self.last + 1
        elif rule == "O":
            yield self.day.step("action", {"type": "action", "action": "stand"})
        rule = bank[b][column]
        if self._decide(rule):
            yield from self._card("third")
        elif rule == "O":
            yield self.day.step("action", {"type": "action", "action": "stand"})

    def _two_tableaux(self) -> Iterator[Step]:
        for _ in range(6):
            yield from self._card("deal")
        for _ in range(3):
            if self.rng.random() < 0.5:
                yield from self._card("third")


for _game in ("baccarat", "chemin-de-fer", "baccarat-two-tableaux"):
    register(_game, BaccaratRounds)
