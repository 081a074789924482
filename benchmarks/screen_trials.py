"""Trials of the shuffle screen: simulated shoes, fair or shuffled by a weak model, fed
to :class:`controller.screening.ShuffleScreen` as the engine feeds it.

A shoe's **shape** (how many cards each round's pile holds, burns included, in the order
played) comes from the simulated dealer's correct days of a profile, so piles and depths
are the game's own: 4–6 cards a baccarat hand, a blackjack round of 1–7 boxes, the cut
card where the profile puts it. The order of the cards is then drawn separately — fair
(uniform) or by a model of :mod:`simulators.shuffles` — since the screen looks only at
the order and the piles. ``benchmarks/shuffle_screen.py`` runs these trials in bulk;
tests/test_shuffle_screen.py runs a quick set. (It lives beside the benchmarks: it joins the
controller's screen to the simulators' shuffles, which no layer of the product may do.)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from controller.cards import Card, pack
from controller.engine import TableEngine
from controller.engine.day import screen_settings
from controller.events import parse_event
from controller.outputs import Note
from controller.profiles import Profile
from controller.screening import Finding, ScreenSettings, ShuffleScreen
from simulators import shuffles
from simulators.dealer import DayPlan, table_day

Round = tuple[int, ...]
"""One round's pile, a number per card in the order read: the hand the referee placed it
in (0, 1, … in the order the hands were first dealt to), -1 for a card no hand holds (a
burn)."""
Shape = tuple[Round, ...]  # the rounds' piles, in the order dealt


def size(shape: Shape) -> int:
    """The cards a shoe of this shape reads."""
    return sum(map(len, shape))


def shapes_for(profile: Profile, seed: int = 0, shoes: int = 6) -> list[Shape]:
    """The piles of the shoes of correct simulated days of ``profile``: per round, the
    hand of each card, as the engine's referee placed them (its round notes)."""
    out: list[Shape] = []
    plan = DayPlan(shoes=shoes, rounds_per_block=3, dealer_changes=True)
    engine = TableEngine(profile)
    current: list[Round] = []
    pile = 0
    for step in table_day(profile, seed, plan):
        t = step.event["type"]
        outputs = engine.handle(parse_event(step.event))
        if t == "shuffle" and (current or pile):
            out.append(tuple(current + ([(-1,) * pile] if pile else [])))
            current, pile = [], 0
        elif t == "card":
            pile += 1
        elif t == "round_end" and pile:
            hands: list[object] = next(
                ([c.get("to") for c in o.data.get("cards", ())] for o in outputs
                 if isinstance(o, Note) and o.kind == "round"), [])
            hands = hands[-pile:]
            number: dict[object, int] = {}
            for h in hands:
                number.setdefault(h, len(number))
            current.append((-1,) * (pile - len(hands)) + tuple(number[h] for h in hands))
            pile = 0
    if current or pile:
        out.append(tuple(current + ([(-1,) * pile] if pile else [])))
    return out


def settings_for(profile: Profile) -> ScreenSettings:
    return screen_settings(profile.shuffle_screen)  # as the engine builds them


@dataclass
class ShoeResult:
    finding: Finding | None
    dealt: list[Card]
    piles: list[list[Card]]
    unread: list[Card]
    hands: list[list[int]]  # per pile, each card's hand (-1: none), as in the shape

    @property
    def raised_at(self) -> int | None:
        """Cards read when the finding was raised (None: no finding)."""
        return self.finding.raised_at if self.finding else None


def deal(screen: ShuffleScreen, order: Sequence[Card], shape: Shape, shoe: int
         ) -> ShoeResult:
    """Deal ``order`` by ``shape`` through ``screen`` (a new shoe); stop feeding at the
    first finding, but report the whole shoe's piles."""
    screen.start_shoe(shoe)
    finding: Finding | None = None
    piles: list[list[Card]] = []
    hands: list[list[int]] = []
    i = 0
    for labels in shape:
        pile = list(order[i:i + len(labels)])
        i += len(labels)
        for c in pile:
            got = screen.card(c)
            if got is not None and finding is None:
                finding = got
        screen.round_end([(c.deck_index, h) for c, h in zip(pile, labels, strict=True)
                          if h >= 0])
        piles.append(pile)
        hands.append(list(labels))
    got = screen.end_shoe()
    if got is not None and finding is None:
        finding = got
    return ShoeResult(finding, list(order[:i]), piles, list(order[i:]), hands)


Model = Callable[[list[Card], random.Random], list[Card]]

COLLECTED = {"discards 2 riffles, hands reversed": "reversed",
             "discards 2 riffles, hands unordered": "shuffled"}
"""How a model's dealer lays each hand's cards in the discards (``shuffles.collected``;
"dealt" otherwise): the guide keeps a hand so it can be laid out again, not which way up
(the screen's ``hand_order``)."""

MODELS: dict[str, tuple[str, Model]] = {
    # name: (which order it works on, model); "new-deck": the first shoe after a check,
    # "previous": the previous shoe's discards
    "unshuffled": ("new-deck", lambda o, r: shuffles.cut(o, r, 0)),
    "cut only": ("new-deck", lambda o, r: shuffles.cut(o, r)),
    "1 riffle": ("new-deck", lambda o, r: shuffles.cut(shuffles.riffle(o, r, 1), r)),
    "2 riffles": ("new-deck", lambda o, r: shuffles.cut(shuffles.riffle(o, r, 2), r)),
    "3 riffles": ("new-deck", lambda o, r: shuffles.cut(shuffles.riffle(o, r, 3), r)),
    "shelf pass (10)": ("new-deck", lambda o, r: shuffles.cut(shuffles.shelf_pass(o, r, 10), r)),
    "discards cut only": ("previous", lambda o, r: shuffles.cut(o, r)),
    "discards 1 riffle": ("previous", lambda o, r: shuffles.cut(shuffles.riffle(o, r, 1), r)),
    "discards 2 riffles": ("previous", lambda o, r: shuffles.cut(shuffles.riffle(o, r, 2), r)),
    "discards 3 riffles": ("previous", lambda o, r: shuffles.cut(shuffles.riffle(o, r, 3), r)),
    "discards 2 riffles, hands reversed": ("previous", lambda o, r: shuffles.cut(
        shuffles.riffle(o, r, 2), r)),
    "discards 2 riffles, hands unordered": ("previous", lambda o, r: shuffles.cut(
        shuffles.riffle(o, r, 2), r)),
    "discards shelf pass": ("previous",
                            lambda o, r: shuffles.cut(shuffles.shelf_pass(o, r, 10), r)),
    "slug 20": ("previous", lambda o, r: _slug(o, r, 20)),
    "slug 40": ("previous", lambda o, r: _slug(o, r, 40)),
    "slug 60": ("previous", lambda o, r: _slug(o, r, 60)),
}


def _slug(order: list[Card], rng: random.Random, length: int) -> list[Card]:
    # model_trial places slugs itself: from the cards that were read, in front of the
    # new shoe's cut card (where they are dealt)
    return shuffles.with_slug(order, rng, length)


def model_trial(profile: Profile, model: str, shape_prev: Shape, shape: Shape,
                rng: random.Random, settings: ScreenSettings | None = None
                ) -> tuple[int | None, int]:
    """One shoe shuffled by ``model``: (cards read when the screen raised its finding, or
    None; for a slug counted from the slug's first card) and the cards read in the shoe."""
    decks = profile.decks.max
    screen = ShuffleScreen(settings or settings_for(profile), decks)
    screen.deck_check()
    where, fn = MODELS[model]
    if where == "new-deck":
        order = fn(pack(decks), rng)
        result = deal(screen, order, shape, 1)
    else:
        first = pack(decks)
        rng.shuffle(first)
        prev = deal(screen, first, shape_prev, 1)
        pile = shuffles.collected(prev.piles, prev.hands, prev.unread,
                                  COLLECTED.get(model, "dealt"), rng)
        if model.startswith("slug"):
            read = len(prev.dealt)
            length = int(model.split()[1])
            start = rng.randrange(max(1, read - length + 1))
            order = shuffles.with_slug(pile, rng, length, start=start, within=size(shape))
            slug_at = next(i for i in range(len(order))
                           if order[i:i + length] == pile[start:start + length])
            result = deal(screen, order, shape, 2)
            found = result.raised_at
            return (None if found is None or found <= slug_at else found - slug_at), \
                size(shape)
        order = fn(pile, rng)
        result = deal(screen, order, shape, 2)
    return result.raised_at, size(shape)


def null_day(profile: Profile, shapes: Sequence[Shape], rng: random.Random,
             settings: ScreenSettings | None = None) -> Iterator[Finding | None]:
    """Fairly shuffled shoes one after the other (each held against the last): the
    finding of each shoe (None: no alarm)."""
    decks = profile.decks.max
    screen = ShuffleScreen(settings or settings_for(profile), decks)
    screen.deck_check()
    cards = pack(decks)
    for n, shape in enumerate(shapes, 1):
        rng.shuffle(cards)
        yield deal(screen, cards, shape, n).finding


def day_of_findings(profile_name: str, model: str | None, seed: int, exact: bool = False,
                    screen_class: type[ShuffleScreen] = ShuffleScreen) -> list[Finding | None]:
    """Three shoes of one profile through one screen: fair, then ``model`` (None: fair)
    applied to the order it works on, then fair; every finding (None: no alarm).
    ``screen_class``: the screen's class (tests/test_native.py holds the compiled one
    against its source)."""
    from controller.profiles import load_profile

    profile = load_profile(profile_name)
    decks = profile.decks.max
    shapes = shapes_for(profile, seed % 3)
    rng = random.Random(f"{profile_name}:{model}:{seed}")
    screen = screen_class(settings_for(profile), decks, exact=exact)
    screen.deck_check()
    out: list[Finding | None] = []
    order = pack(decks)
    rng.shuffle(order)
    prev = deal(screen, order, shapes[0], 1)
    out.append(prev.finding)
    if model is None:
        order = pack(decks)
        rng.shuffle(order)
    elif MODELS[model][0] == "new-deck":
        screen.deck_check()
        order = MODELS[model][1](pack(decks), rng)
    else:
        pile = shuffles.collected(prev.piles, prev.hands, prev.unread)
        order = (shuffles.with_slug(pile, rng, int(model.split()[1]), start=20,
                                    within=size(shapes[1])) if model.startswith("slug")
                 else MODELS[model][1](pile, rng))
    out.append(deal(screen, order, shapes[1], 2).finding)
    order = pack(decks)
    rng.shuffle(order)
    out.append(deal(screen, order, shapes[2 % len(shapes)], 3).finding)
    return out
