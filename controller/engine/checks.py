"""The per-step checks: what a step's content must satisfy, each appending its deviations.

Each check takes the engine's deviation factory (``make``: the profile's rule for the
code) and the list of outputs; it holds no state of its own. The engine decides when a
check runs and keeps what it needs between steps.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from controller.cards import Card, deck, parse_card
from controller.events import DeckCheck, DeckLot, TableOpen
from controller.outputs import Note, Output
from controller.profiles import Profile
from controller.rounds import DeviationFactory

SABOT_ROTATION_K = 3
"""Default K: a sabot on the same table at its last K openings is flagged (001 §3)."""


Opening = tuple[str | None, str | None]
"""(date, sabot) of one table opening."""


def openings_from(history: Mapping[str, Sequence[Any]] | None) -> dict[str, list[Opening]]:
    """``{table: [{"date": "YYYY-MM-DD", "sabot": "S-07"}, …]}`` (oldest first) as (date, sabot)."""
    out: dict[str, list[Opening]] = {}
    if history is None:
        return out
    if not isinstance(history, Mapping):
        raise ValueError("sabot_history must map table ids to lists of openings")
    for table, openings in history.items():
        if not isinstance(openings, Sequence) or isinstance(openings, str):
            raise ValueError(f"sabot_history[{table!r}] must be a list of openings")
        rows: list[Opening] = []
        for i, item in enumerate(openings):
            if not isinstance(item, Mapping) or not set(item) <= {"date", "sabot"}:
                raise ValueError(f"sabot_history[{table!r}][{i}] must be "
                                 "{'date': 'YYYY-MM-DD', 'sabot': id}")
            date, sabot = item.get("date"), item.get("sabot")
            if date is not None and not isinstance(date, str):
                raise ValueError(f"sabot_history[{table!r}][{i}].date must be a string")
            if sabot is not None and not isinstance(sabot, str):
                raise ValueError(f"sabot_history[{table!r}][{i}].sabot must be a string")
            rows.append((date, sabot))
        out[str(table)] = rows
    return out


def check_sabot(past: list[Opening], k: int, e: TableOpen, open_date: dt.date | None,
                make: DeviationFactory, out: list[Output]) -> None:
    """001 §3: the same sabot must not be put on the same table systematically. ``past`` is
    the table's openings so far; this one is added to it. A table reopened the same day
    with the sabot it had is the same placement: neither judged nor counted again (four
    openings of one day flagged a correct table: a review's false alarm)."""
    today = open_date.isoformat() if open_date else None
    if past and today is not None and past[-1] == (today, e.sabot):
        return
    last = past[-k:]
    if e.sabot is not None and len(last) == k and all(s == e.sabot for _, s in last):
        dates = [d for d, _ in last]
        out.append(make(
            "SABOT_ROTATION",
            f"sabot {e.sabot} is on table {e.table} again: it was placed there at the "
            f"table's last {k} openings; sabots must not go to the same table "
            "systematically (001 §3)",
            sabot=e.sabot, table=e.table, openings=dates, k=k))
    past.append((open_date.isoformat() if open_date else None, e.sabot))


def judge_lots(profile: Profile, lots: Iterable[DeckLot], judged_on: dt.date | None,
               make: DeviationFactory, out: list[Output],
               closed: Container[tuple[str, dt.date]] = frozenset()) -> None:
    """Judge lots on ``judged_on`` (the date of the event that brought them, or the opening).
    ``closed``: the paper lots (id, first use) that were in play when a table closed (where
    the profile's ``paper_until_close`` says they were destroyed then)."""
    rule = profile.deck_lifecycle
    if judged_on is None:
        out.append(Note("lots_not_judged", "deck lots not judged: table_open has no time",
                        {"lots": [lot.id for lot in lots]}))
        return
    for lot in lots:
        age = (judged_on - lot.first_use).days
        if age < 0:
            out.append(make(
                "DECK_EXPIRED",
                f"lot {lot.id}: first use {lot.first_use} is after the opening date "
                f"{judged_on}; its age cannot be trusted",
                lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                opened=str(judged_on)))
        elif lot.kind == "plastic":
            days = age + 1 if rule.plastic_day_count == "calendar" else age
            if days > rule.plastic_max_days:
                out.append(make(
                    "DECK_EXPIRED",
                    f"plastic lot {lot.id} first used {lot.first_use}: {days} days, more "
                    f"than {rule.plastic_max_days}",
                    lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                    opened=str(judged_on), days=days,
                    max_days=rule.plastic_max_days))
        elif rule.paper_same_day_only and age > 0:
            out.append(make(
                "DECK_EXPIRED",
                f"paper lot {lot.id} opened {lot.first_use} reused on {judged_on}",
                lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                opened=str(judged_on)))
        elif (lot.id, lot.first_use) in closed:
            out.append(make(
                "DECK_EXPIRED",
                f"paper lot {lot.id} was in play when the table closed: paper decks are "
                "destroyed at the close, a table opens with new ones",
                lot=lot.id, kind=lot.kind, first_use=str(lot.first_use),
                opened=str(judged_on), closed_before=True))


def check_composition(event: DeckCheck, decks: int, make: DeviationFactory,
                      out: list[Output]) -> Counter[Card]:
    """A counted pack holds each of the 52 cards ``decks`` times, and nothing else.
    Returns the cards counted more often than that (empty when none)."""
    if not event.foreign and event.cards == _full_pack(decks):
        return Counter()  # (the usual count, its cards sorted: one comparison, no count of each)
    got = Counter(event.cards)
    missing = Counter({c: decks - got[c] for c in deck() if got[c] < decks})
    extra = Counter({c: n - decks for c, n in got.items() if n > decks})
    if missing:
        names = sorted(str(c) for c in missing.elements())
        out.append(make(
            "DECK_INCOMPLETE", f"{len(names)} card(s) missing: {', '.join(names)}",
            missing=names, counted=len(event.cards) + len(event.foreign),
            expected=decks * 52))
    if extra:
        names = sorted(str(c) for c in extra.elements())
        out.append(make(
            "DECK_EXTRA_CARD",
            f"{len(names)} card(s) more than {decks} deck(s) hold: {', '.join(names)}",
            extra=names, decks=decks))
    if event.foreign:
        out.append(make(
            "DECK_FOREIGN_CARD",
            f"{len(event.foreign)} card(s) not of the 52: {', '.join(event.foreign)}",
            foreign=list(event.foreign)))
    return extra


@functools.cache
def _full_pack(decks: int) -> tuple[Card, ...]:
    """A whole pack of ``decks`` decks in a deck check's order (its cards sorted), made of
    the cards parsing gives (so that most comparisons are of the same object)."""
    return tuple(sorted(parse_card(str(c)) for c in deck() for _ in range(decks)))


def check_cut(offset: int, size: int, need: int, make: DeviationFactory,
              out: list[Output]) -> None:
    """At least ``need`` cards each side of the cut."""
    if need and (offset < need or size - offset < need):
        out.append(make(
            "CUT_TOO_SHALLOW",
            f"cut at {offset} of {size}: {offset} and {size - offset} cards each "
            f"side, at least {need} required",
            offset=offset, pack=size, top=offset, bottom=size - offset,
            min_each_side=need))


def window_holds(profile: Profile, positions: Iterable[int]) -> bool:
    """Does the profile's cut-card window hold any of ``positions``?"""
    window = profile.cut_card.window()
    return window is not None and any(window[0] <= p <= window[1] for p in positions)


def check_cut_card_window(profile: Profile, position: int, how: str, make: DeviationFactory,
                          out: list[Output]) -> None:
    """The cut card sits within the profile's window (``how``: placed, or came out)."""
    window = profile.cut_card.window()
    assert window is not None
    lo, hi = window
    if not lo <= position <= hi:
        want = f"{lo}" if lo == hi else f"{lo}–{hi}"
        out.append(make(
            "CUT_CARD_POSITION",
            f"cut card {how} with {position} card(s) behind it; the rule is {want}",
            position=position, measured=how == "came out", window=[lo, hi]))
