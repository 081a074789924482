"""One round laid out (``audit report --round N``): bets, cards in dealing order, hands, result.

The hand reconstruction a dispute needs, from the round's note (the referee's layout of
the cards and the result) and its inputs (each card's time and sequence number).
"""

from __future__ import annotations

import os
from typing import Any

from controller.audit.replay import Difference
from controller.audit.report.model import (
    CardRow,
    DayReport,
    Report,
    RoundInfo,
    clock,
    list_at,
)
from controller.cards import CardError, blackjack_total, parse_card
from controller.games.blackjack import same_place
from controller.screening.evidence import run_text


def round_lines(day: DayReport, r: RoundInfo) -> list[str]:
    """The hand reconstruction of one round, from its round note and its inputs."""
    data = r.data or {}
    out = [f"== round {r.round}: {day.title}, shoe {r.shoe} (profile {day.profile}, "
           f"game {day.game})",
           f"  bets closed {clock(r.start)} (seq {r.seq}"
           + (f" of {os.path.basename(r.file)}" if len(day.files) > 1 and r.file else "") + ")"
           + "".join(f", {k} {v}" for k, v in r.bets.items())
           + (f"; round ended {clock(r.end)}" if r.end else "; the round did not end"),
           f"  dealer: {r.dealer[0]} (since {clock(r.dealer[1])})" if r.dealer else
           "  dealer: not recorded (no dealer change before this round)"]
    if r.cut_card is not None or r.last_hand is not None:
        cut = (f"the cut card came out {clock(r.cut_card[0])} (seq {r.cut_card[1]})"
               if r.cut_card is not None else "")
        out.append("  last hand of the shoe: " + "; ".join(x for x in (cut, r.last_hand) if x))
    cards = list_at(data, "cards")
    read = [*r.early, *r.inputs]  # every card read for the round, in order
    times = _aligned(read, cards)
    if r.early:
        out.append("  dealt before bets closed (CARD_BEFORE_BETS_CLOSED):")
        for c in r.early:
            out.append(f"     -  {c.card:4}  {'':8}  {'early':9}  {clock(c.time):20}  {c.seq}")
    out.append("  cards in dealing order:")
    out.append("     #  card  to        why        time                  seq")
    void = _void_rows(data, cards)
    out_at = r.cut_card[1] if r.cut_card is not None else None  # (the cut card's seq)
    for i, c in enumerate(cards, start=1):
        t = times[i - 1]
        if out_at is not None and r.cut_card is not None and t is not None \
                and isinstance(t.seq, int) and out_at < t.seq:
            if i > 1:  # (between two of the round's cards: where, among them, a review)
                out.append(f"     -  the cut card came out here ({clock(r.cut_card[0])}, "
                           f"seq {out_at})")
            out_at = None
        out.append((f"    {i:2d}  {c.get('card', '?')!s:4}  {c.get('to', '')!s:8}  "
                    f"{c.get('why', '')!s:9}  {clock(t.time) if t else '':20}  "
                    f"{t.seq if t else ''}"
                    + ("  VOID: the hand was finished, the card not counted"
                       if i - 1 in void else "")
                    + _named_elsewhere(day.game, t, c)).rstrip())
    if not cards and r.inputs:
        for i, c in enumerate(r.inputs, start=1):
            out.append(f"    {i:2d}  {c.card:4}  {'?':8}  {'':9}  {clock(c.time):20}  {c.seq}")
    elif cards and r.inputs and (None in times or len(read) != len(cards)):
        out.append(f"  cards read (their times; {len(r.inputs)} read, {len(cards)} in the "
                   "round note):")
        for i, c in enumerate(r.inputs, start=1):
            out.append(f"    {i:2d}  {c.card:4}  {'':8}  {'':9}  {clock(c.time):20}  {c.seq}")
    for when, where, count in r.returned:
        out.append(f"  discards returned to the shuffler: {count} card(s) ({clock(when)}, "
                   f"seq {where})")
    if r.actions:
        out.append("  actions: " + ", ".join(f"{a} ({clock(t)})" for t, a in r.actions))
    out += _result_lines(data)
    if r.note_text:
        out.append(f"  result: {r.note_text} (round note, seq {r.note_seq})")
    else:
        out.append("  result: no round note (the round did not end in this log)")
    if r.deviations:
        out.append("  deviations in this round:")
        for d in r.deviations:
            out.append(f"    seq {d.seq}: {d.code} [{d.severity}] {d.message} ({d.rule})")
            run = run_text(d.evidence)
            if run:
                out.append(f"      {run}")
    return out


def _named_elsewhere(game: str | None, row: CardRow | None, card: dict[str, Any]) -> str:
    """A blackjack card the table's record named to another place than the one the round
    note laid it in (a ``to`` naming a hand owed no card of the deal is not read there,
    docs/dealing-blackjack.md): the record's place beside the reading, so an auditor
    settling that box sees both (a review: the card showed in the other box, unmarked)."""
    laid = card.get("to")
    if game != "blackjack" or row is None or row.to is None or not isinstance(laid, str):
        return ""
    return f"  (recorded to {row.to[:20]})" if same_place(row.to, laid) is False else ""


def _as_dealt(dealer: dict[str, Any]) -> str:
    """The dealer's total with the cards drawn against the rule (void, not counted): the
    hand the players saw, beside the one the outcomes are settled against (a review: the
    view read as if the table had shown the rule's hand)."""
    try:
        cards = [parse_card(str(c)) for c in [*dealer.get("cards", ()), *dealer["void"]]]
    except (CardError, TypeError):
        return ""
    total, soft = blackjack_total(cards)
    return (f" (as dealt {total}{' soft' if soft else ''}; the outcomes are settled against "
            "the hand the rule required)")


def _hand_text(cards: Any, total: Any, soft: Any = False) -> str:
    shown = " ".join(cards) if isinstance(cards, list) else "?"
    total_text = "" if total is None else f" = {total}" + (" soft" if soft else "")
    return shown + total_text


def _aligned(inputs: list[CardRow], cards: list[dict[str, Any]]) -> list[CardRow | None]:
    """Each card of the round note with the input that read it (its time and seq): the
    inputs in order where they are as many, else each card with the next input of the same
    card (a card read early, or one the note leaves out, no longer blanks every time)."""
    if len(inputs) == len(cards):
        return list(inputs)
    out: list[CardRow | None] = []
    at = 0
    for c in cards:
        j = next((k for k in range(at, len(inputs)) if inputs[k].card == str(c.get("card"))),
                 None)
        out.append(inputs[j] if j is not None else None)
        if j is not None:
            at = j + 1
    return out


def _void_rows(data: dict[str, Any], cards: list[dict[str, Any]]) -> set[int]:
    """The rows of blackjack cards laid on a hand already finished (the round note's
    ``void`` of each hand and of the dealer): the last ones of that card to that hand."""
    voids: dict[tuple[str, str], int] = {}
    hands = data.get("hands")
    dealer = data.get("dealer")
    for name, hand in ([(h.get("hand"), h) for h in hands if isinstance(h, dict)]
                       if isinstance(hands, list) else []) + \
            ([("dealer", dealer)] if isinstance(dealer, dict) else []):
        for card in hand.get("void") or ():
            key = (str(name), str(card))
            voids[key] = voids.get(key, 0) + 1
    rows: set[int] = set()
    for i in range(len(cards) - 1, -1, -1):
        key = (str(cards[i].get("to")), str(cards[i].get("card")))
        if voids.get(key):
            voids[key] -= 1
            rows.add(i)
    return rows


def _result_lines(data: dict[str, Any]) -> list[str]:
    out: list[str] = []
    hands = data.get("hands")
    if isinstance(hands, list):  # blackjack
        out.append("  hands:")
        for h in hands:
            flags = [k for k in ("blackjack", "bust", "doubled", "split", "surrendered")
                     if h.get(k)]
            pays = f", pays {h['pays']}" if h.get("pays") else ""
            hand = _hand_text(h.get("cards"), h.get("total"), h.get("soft"))
            void = (f"; void, not counted: {' '.join(map(str, h['void']))}"
                    if h.get("void") else "")
            out.append(f"    {h.get('hand')}: {hand}" + (f" ({', '.join(flags)})" if flags else "")
                       + f" -> {h.get('outcome')}{pays}{void}")
        dealer = data.get("dealer")
        if isinstance(dealer, dict):
            flags = [k for k in ("blackjack", "bust", "peeked") if dealer.get(k)]
            hand = _hand_text(dealer.get("cards"), dealer.get("total"), dealer.get("soft"))
            void = (f"; void, not counted: {' '.join(map(str, dealer['void']))}"
                    + _as_dealt(dealer) if dealer.get("void") else "")
            out.append(f"    dealer: {hand}" + (f" ({', '.join(flags)})" if flags else "")
                       + void)
        if data.get("insurance"):
            out.append(f"    insurance: {data['insurance']}")
    elif isinstance(hands, dict):  # stud poker
        out.append("  hands:")
        for name, h in hands.items():
            rank = f" ({h.get('rank')})" if h.get("rank") is not None else ""
            extra = " VOID" if h.get("void") else ""
            out.append(f"    {name}: {_hand_text(h.get('cards'), None)}{rank}{extra}")
        results = data.get("results")
        if isinstance(results, dict):
            for name, res in results.items():
                out.append(f"    {name}: {res.get('outcome')}"
                           + "".join(f", {k} {v:+d}" for k, v in res.items()
                                     if k in ("ante", "raise") and isinstance(v, int)))
        if "dealer_qualifies" in data:
            out.append(f"    dealer qualifies: {data.get('dealer_qualifies')}")
    elif "winner" in data or "punto" in data:  # baccarat family
        cards = list_at(data, "cards")
        for side in ("punto", "banco"):
            side_cards = [c.get("card") for c in cards if c.get("to") == side]
            if side_cards or data.get(side) is not None:
                out.append(f"  {side}: {_hand_text(side_cards, data.get(side))}")
        if data.get("naturals"):
            out.append(f"  naturals: {', '.join(data['naturals'])}")
        out.append(f"  winner: {data.get('winner') or '-'}"
                   + (" (dummy hand: bets not accepted)" if data.get("dummy") else ""))
    return out


def render_round(report: Report, n: int, table: str | None = None) -> str | None:
    found = report.find_round(n, table)
    if not found:
        return None
    out: list[str] = [*report.verdict, ""] if report.verdict else []
    for day, r in found:
        out += round_lines(day, r)
        after = [x.seq for x in day.rounds if x.file == r.file and x.seq is not None
                 and r.seq is not None and x.seq > r.seq]
        for d in differences_in(report, r, min(after, default=None)):
            out += difference_lines(d)
        out.append("")
    for note in report.notes:
        out.append(f"note: {note}")
    return "\n".join(out).rstrip() + "\n"


def difference_lines(d: Difference) -> list[str]:
    """One difference, short: where and what, and the two texts of a note or deviation
    (the records themselves: ``audit replay``)."""
    out = [f"  REPLAY DIFFERS: seq {d.seq} ({os.path.basename(d.file)}:{d.line}): {d.what}"]
    for name, value in (("logged", d.logged), ("replayed", d.replayed)):
        if isinstance(value, dict) and isinstance(value.get("text") or value.get("message"),
                                                  str):
            out.append(f"    {name + ':':9} {value.get('text') or value.get('message')}")
    return out


def differences_in(report: Report, r: RoundInfo, next_round: int | None = None
                   ) -> list[Difference]:
    """The replay's differences from the log within round ``r`` (from its bets to its round
    note, or, its note missing, to the next round's bets): a forged or deleted result
    shows where the auditor is looking, not only in the full report."""
    if r.seq is None:
        return []
    if r.note_seq is not None:
        last = r.note_seq
    else:
        last = next_round - 1 if next_round is not None else 1 << 62
    return [d for d in report.differences
            if d.seq is not None and r.seq <= d.seq <= last and d.file == r.file]

