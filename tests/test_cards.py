"""Card notation, packs and the value tables (issue: cards)."""

from __future__ import annotations

from collections import Counter

import pytest

from controller.cards import (
    Card,
    CardError,
    baccarat_value,
    blackjack_total,
    burn_value,
    deck,
    pack,
    parse_card,
)


@pytest.mark.parametrize(
    ("token", "rank", "suit"),
    [("AS", "A", "S"), ("th", "T", "H"), ("10D", "T", "D"), ("10c", "T", "C"),
     (" 7s ", "7", "S"), ("KC", "K", "C")],
)
def test_parse_good(token: str, rank: str, suit: str) -> None:
    assert parse_card(token) == Card(rank, suit)


@pytest.mark.parametrize("token", ["1S", "AX", "", "ASD", "JK", "11H", "T", 10, None, "0S",
                                   "a\u017f", "\u00a07h\u2003", "\uff21S"])  # (not ASCII)
def test_parse_bad_names_the_token(token: object) -> None:
    with pytest.raises(CardError) as info:
        parse_card(token)
    assert repr(token) in str(info.value)


def test_canonical_string() -> None:
    assert str(parse_card("10h")) == "TH"


def test_deck_and_pack() -> None:
    one = deck()
    assert len(one) == 52 == len(set(one))
    six = pack(6)
    assert len(six) == 312
    assert set(Counter(six).values()) == {6}
    with pytest.raises(ValueError):
        pack(0)


@pytest.mark.parametrize(("rank", "bacc", "burn"), [
    ("A", 1, 1), ("2", 2, 2), ("5", 5, 5), ("9", 9, 9), ("T", 0, 10), ("J", 0, 10),
    ("Q", 0, 10), ("K", 0, 10),
])
def test_values(rank: str, bacc: int, burn: int) -> None:
    card = Card(rank, "S")
    assert baccarat_value(card) == bacc
    assert burn_value(card) == burn
    assert burn_value(card, ten_value=7) == (7 if rank in "TJQK" else burn)


@pytest.mark.parametrize(("cards", "total", "soft"), [
    ("AS KD", 21, True), ("AS AD", 12, True), ("AS AD 9C", 21, True),
    ("AS AD 9C KH", 21, False), ("TS 6D", 16, False), ("AS 6D", 17, True),
    ("AS 6D TC", 17, False), ("AS AH AD AC", 14, True), ("KS QD 5C", 25, False),
])
def test_blackjack_totals(cards: str, total: int, soft: bool) -> None:
    assert blackjack_total(parse_card(c) for c in cards.split()) == (total, soft)


def test_a_card_knows_its_place_in_new_deck_order_and_it_changes_no_comparison() -> None:
    assert [c.deck_index for c in deck()] == list(range(52))
    assert parse_card("KC").deck_index == 51 and parse_card("10h").deck_index == 22
    assert Card("A", "S") == parse_card("AS") and hash(Card("A", "S")) == hash(parse_card("as"))
    assert "deck_index" not in repr(Card("A", "S"))
    assert Card("X", "S").deck_index == -1  # outside the notation: nothing in new-deck order
