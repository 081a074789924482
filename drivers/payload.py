"""Reading a device message's payload: typed fields or a :class:`PayloadError` naming the field.

Every device driver takes its message bodies apart with these helpers, so a malformed
payload is always reported the same way (a ``PROTOCOL_ERROR`` ``bad_payload``, and an
``UNREADABLE_CARD`` when the message meant a card), never as a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller.cards import Card, CardError, parse_card
from controller.events import DeckCheck

MAX_CHECK_CARDS = 1_040
"""Cards one deck check may gather (20 decks): a scan or split DECK_CHECK beyond it is
dropped, never held without end."""


class PayloadError(ValueError):
    """A message whose payload lacks a field or has one of the wrong type."""


def body_card(body: Mapping[str, Any], key: str = "card") -> Card:
    token = body.get(key)
    if not isinstance(token, str):
        raise PayloadError(f"{key!r} should be a card string, got {token!r}")
    try:
        return parse_card(token)
    except CardError as e:
        raise PayloadError(str(e)) from e


def body_int(body: Mapping[str, Any], key: str, *, optional: bool = False) -> int | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PayloadError(f"{key!r} should be a count, got {value!r}")
    return value


def body_str(body: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise PayloadError(f"{key!r} should be a non-empty string, got {value!r}")
    return value


def body_bool(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key)
    if not isinstance(value, bool):
        raise PayloadError(f"{key!r} should be true or false, got {value!r}")
    return value


def unreadable(body: Mapping[str, Any]) -> bool:
    return body.get("unreadable") is True


def deck_check(tokens: Iterable[str], t: str | None) -> DeckCheck:
    """A ``deck_check`` from card tokens; tokens that are not one of the 52 are foreign."""
    cards: list[Card] = []
    foreign: list[str] = []
    for token in tokens:
        try:
            cards.append(parse_card(token))
        except CardError:
            foreign.append(str(token))
    return DeckCheck(cards=tuple(sorted(cards)), foreign=tuple(sorted(foreign)), t=t)
