"""What the pages and the JSON API show of a table, with the floor's card disclosure applied.

One view of a table (:func:`table_view`) feeds the one template that draws a table live
(``templates/table_live.html``): the floor's table page and the table's own dealer display
render the same view with the same template. Cards are only ever ones that left the shoe
(the log holds no other); the disclosure setting decides when the floor shows them:

- ``live``: as they come out;
- ``round``: a round's cards once the round has ended;
- ``shoe``: no card, hand or total of the current shoe until that shoe ends (blackjack
  floors that want no live count), only each round's outcome.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from floor import roads
from floor.alerts import Alert, worst
from floor.tablestate import RoundSeen, TableState

RECENT_ROUNDS = 8
RECENT_DEVIATIONS = 12
SUITS = {"S": ("♠", "black"), "C": ("♣", "black"), "H": ("♥", "red"), "D": ("♦", "red")}


class Disclosure(StrEnum):
    LIVE = "live"
    ROUND = "round"
    SHOE = "shoe"


def card_face(card: str) -> dict[str, str]:
    """``TS`` → 10♠ (black); anything else as it is."""
    if len(card) >= 2 and card[-1] in SUITS:
        rank = "10" if card[:-1] == "T" else card[:-1]
        suit, colour = SUITS[card[-1]]
        return {"code": card, "text": rank + suit, "colour": colour}
    return {"code": card, "text": card, "colour": "black"}


def _cards(codes: list[str]) -> list[dict[str, str]]:
    return [card_face(c) for c in codes]


def _round_view(r: RoundSeen, game: str | None, show_cards: bool) -> dict[str, Any]:
    data = r.data or {}
    out: dict[str, Any] = {"round": r.round, "shoe": r.shoe, "ended": r.ended,
                           "seq": r.seq, "cards_out": len(r.cards), "hidden": not show_cards}
    out["cards"] = _cards([c.card for c in r.cards]) if show_cards else []
    out["text"] = r.text if (show_cards or r.text is None) else _outcome_text(data, game)
    out["hands"] = _hands(data, show_cards) if r.data is not None else []
    if "winner" in data:
        out["winner"] = data.get("winner")
    return out


def _outcome_text(data: dict[str, Any], game: str | None) -> str:
    """A round's outcome with no card and no total (``shoe`` disclosure)."""
    hands = data.get("hands")
    if isinstance(hands, list):
        return "; ".join(f"{h.get('hand')} {h.get('outcome')}" for h in hands
                         if isinstance(h, dict))
    results = data.get("results")
    if isinstance(results, dict):
        return "; ".join(f"{k} {v.get('outcome')}" for k, v in results.items()
                         if isinstance(v, dict))
    if data.get("winner"):
        return str(data["winner"])
    return f"round {data.get('round')}"


def _hands(data: dict[str, Any], show_cards: bool) -> list[dict[str, Any]]:
    """Each hand of a round note: blackjack boxes and dealer, stud hands, baccarat sides."""
    out: list[dict[str, Any]] = []
    hands = data.get("hands")
    if isinstance(hands, list):  # blackjack
        for h in hands:
            if not isinstance(h, dict):
                continue
            flags = [k for k in ("blackjack", "bust", "doubled", "split", "surrendered")
                     if h.get(k)]
            out.append({"hand": h.get("hand"), "cards": _cards(list(h.get("cards") or []))
                        if show_cards else [], "total": h.get("total") if show_cards else None,
                        "soft": h.get("soft"), "outcome": h.get("outcome"),
                        "pays": h.get("pays"), "flags": flags})
        dealer = data.get("dealer")
        if isinstance(dealer, dict):
            flags = [k for k in ("blackjack", "bust") if dealer.get(k)]
            out.append({"hand": "dealer", "cards": _cards(list(dealer.get("cards") or []))
                        if show_cards else [], "total": dealer.get("total") if show_cards
                        else None, "soft": dealer.get("soft"), "outcome": None, "pays": None,
                        "flags": flags})
    elif isinstance(hands, dict):  # stud poker: the hands and payouts once revealed
        results = data.get("results") if isinstance(data.get("results"), dict) else {}
        assert isinstance(results, dict)
        for name, h in hands.items():
            if not isinstance(h, dict):
                continue
            res = results.get(name) if isinstance(results.get(name), dict) else {}
            assert isinstance(res, dict)
            pays = ", ".join(f"{k} {v:+d}" for k, v in res.items()
                             if k in ("ante", "raise", "bonus") and isinstance(v, int))
            out.append({"hand": name, "cards": _cards(list(h.get("cards") or []))
                        if show_cards else [], "total": h.get("rank") if show_cards else None,
                        "soft": False, "outcome": res.get("outcome") if res else
                        ("qualifies" if h.get("qualifies") else None) if name == "dealer"
                        else None, "pays": pays or None,
                        "flags": ["void"] if h.get("void") else []})
    elif "winner" in data:  # baccarat
        cards = data.get("cards") if isinstance(data.get("cards"), list) else []
        assert isinstance(cards, list)
        for side in ("punto", "banco"):
            mine = [c.get("card") for c in cards if isinstance(c, dict) and c.get("to") == side]
            out.append({"hand": side.title(), "cards": _cards([str(c) for c in mine])
                        if show_cards else [], "total": data.get(side) if show_cards else None,
                        "soft": False, "outcome": ("win" if str(data.get("winner")).lower()
                                                   == side else None),
                        "pays": None, "flags": ["natural"] if side in
                        (data.get("naturals") or []) else []})
    return out


def board_view(state: TableState) -> dict[str, Any] | None:
    """The baccarat results board of the current shoe (None for other games)."""
    if state.game not in ("baccarat", "chemin-de-fer", "baccarat-two-tableaux"):
        return None
    played = roads.coups(r.data for r in state.rounds)
    plate = roads.bead_plate(played)
    while len(plate) < 12:
        plate.append([])
    grid = roads.big_road(played)
    counts = {w: sum(1 for c in played if c.winner == w) for w in "BPT"}
    return {"bead_plate": [[_coup_cell(c) for c in col] + [None] * (roads.ROWS - len(col))
                           for col in plate],
            "big_road": [[None if cell is None else {**_coup_cell(cell.coup),
                                                      "ties": cell.ties}
                          for cell in col] for col in roads.road_columns(grid)],
            "counts": counts, "coups": len(played)}


def _coup_cell(c: roads.Coup) -> dict[str, Any]:
    label = {"B": "B", "P": "P", "T": "T"}[c.winner]
    return {"winner": c.winner, "label": label, "round": c.round, "natural": c.natural,
            "punto_pair": c.punto_pair, "banco_pair": c.banco_pair,
            "total": c.banco if c.winner == "B" else c.punto}


def table_view(state: TableState, alerts: list[Alert], *,
               disclosure: Disclosure = Disclosure.LIVE) -> dict[str, Any]:
    """Everything the table's live template draws."""
    shoe_over = state.state in ("shoe_complete", "closing_check", "closed", "shuffle")
    current = state.current
    cur_view = None
    if current is not None:
        show = (disclosure is Disclosure.LIVE
                or (disclosure is Disclosure.ROUND and current.ended)
                or (disclosure is Disclosure.SHOE and shoe_over))
        cur_view = _round_view(current, state.game, show)
    recent = []
    for r in list(state.rounds)[-RECENT_ROUNDS:][::-1]:
        show = disclosure is not Disclosure.SHOE or shoe_over
        recent.append(_round_view(r, state.game, show))
    deviations = list(state.deviations)[-RECENT_DEVIATIONS:][::-1]
    banner = [d for d in deviations if d["seq"] > state.deviation_mark]
    open_alerts = [a for a in alerts if a.is_open]
    return {
        "table": state.table, "profile": state.profile, "game": state.game,
        "state": state.state, "shoe": state.shoe, "round": state.round,
        "prompt": state.prompt, "last_ts": state.last_ts, "last_seq": state.last_seq,
        "disclosure": str(disclosure),
        "shoe_info": {"cards_left": state.cards_left, "cards_out": state.shoe_cards,
                      "burned": state.burned, "cut_card_behind": state.cut_card_behind,
                      "cut_card_out": state.cut_card_out, "last_hand": state.last_hand,
                      "decks": state.decks, "sabot": state.sabot},
        "current": cur_view, "recent": recent, "board": board_view(state),
        "deviations": deviations, "banner": banner,
        "devices": [{"device": d.device, "model": d.model, "serial": d.serial,
                     "port": d.port, "faults": [{"code": k, "text": v}
                                                for k, v in d.faults.items()]}
                    for d in state.devices.values()],
        "open_alerts": [a.to_dict() for a in open_alerts],
        "worst": worst(open_alerts),
    }


#: the words the dealer display puts beside a deviation: what to do, by severity
WHAT_TO_DO = {
    "critical": "STOP — call the pit boss before the next card",
    "warning": "Check the step and correct it; the pit boss is told",
    "info": "Noted in the log",
}
