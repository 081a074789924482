"""The simulated dealer collects the discards as the live guide has it (002 §3 3.6), and
the batch shuffler's riffle of the last pack riffles them so: the simulator's hands agree
with the referee's, and the pack a `riffle of = "last"` fault riffles is the last shoe's
discards hand by hand, round by round, then the cards never dealt."""

from __future__ import annotations

from typing import Any

from controller.engine import TableEngine
from controller.events import parse_event
from controller.outputs import Note
from controller.profiles import load_profile
from simulators import shuffles
from simulators.dealer import DayPlan, table_day
from simulators.pty_host.player import TablePlayer, make_devices


def _referee_hands(outputs: list[Any]) -> list[int] | None:
    """The engine's hands of a round's cards, numbered in the order first dealt to."""
    for o in outputs:
        if isinstance(o, Note) and o.kind == "round":
            number: dict[object, int] = {}
            return [number.setdefault(c.get("to"), len(number))
                    for c in o.data.get("cards", ())]
    return None


def test_the_simulated_blackjack_hands_are_the_referees() -> None:
    # each round_end step carries the hand of every card of the round (a split's second
    # card in its new hand): the same as the hands the engine's referee placed them in
    profile = load_profile("gr-blackjack")
    engine = TableEngine(profile)
    rounds = splits = 0
    for step in table_day(profile, 4, DayPlan(shoes=2)):
        outputs = engine.handle(parse_event(step.event))
        splits += step.event.get("action") == "split"
        if step.event["type"] == "round_end":
            assert step.hands is not None
            assert list(step.hands) == _referee_hands(outputs)
            rounds += 1
    assert rounds > 20 and splits  # (and some rounds with a split in them)


def test_the_shuffler_gets_the_discards_as_collected() -> None:
    profile = load_profile("gr-blackjack")
    steps = table_day(profile, 4, DayPlan(shoes=2))
    player = TablePlayer(profile, steps, make_devices(profile, seed=4))
    shuffles_seen = 0
    rounds: list[list[str]] = []
    hands: list[list[int]] = []
    current: list[str] = []
    shoe = player.devices["shoe"]
    while not player.done:
        step = steps[player.i]
        kind = step.event["type"]
        if kind == "shuffle":
            shuffles_seen += 1
            unread = list(shoe.stack)  # type: ignore[attr-defined]
        player.play_next()
        if kind == "card":
            current.append(player.dealt["shoe"][-1])
        elif kind == "round_end" and current:
            labels = list(step.hands or ())
            rounds.append(current)
            hands.append([-1] * (len(current) - len(labels)) + labels)
            current = []
        elif kind == "shuffle" and shuffles_seen == 2:
            want = shuffles.collected(rounds, hands, unread)
            assert player.devices["shuffler"].discards == want  # type: ignore[attr-defined]
            # not the order dealt: per round the burns, then the hand first dealt to last
            # (the dealer's, where no box split) … the first box's last
            dealt = [c for r in rounds for c in r]
            assert want != dealt + unread and sorted(want) == sorted(dealt + unread)
            first, of = rounds[0], hands[0]
            burns = [c for c, h in zip(first, of, strict=True) if h == -1]
            by_hand = [[c for c, h in zip(first, of, strict=True) if h == n]
                       for n in sorted(set(of) - {-1}, reverse=True)]
            assert want[:len(first)] == burns + [c for hand in by_hand for c in hand]
            break
    assert shuffles_seen == 2
