"""Reading one device message's payload: each field checked by :mod:`controller.validation`.

A payload is a JSON object from a device (docs/protocol.md lists each message's fields).
A field that is missing or of the wrong kind raises :class:`PayloadError` naming it; the
driver reports the message as a ``PROTOCOL_ERROR`` ``bad_payload`` with that text and goes
on (a card in such a message is still a card that left the device: see
``SwpDriver.unusable``), never as a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller import events
from controller.cards import Card, CardError, parse_card
from controller.validation import Invalid, check_bool, check_int, check_text, show

MAX_CHECK_CARDS = events.MAX_CHECK_CARDS
"""Cards one deck check may gather (20 decks, the most an event may list): a scan or split
DECK_CHECK beyond it is dropped, never held without end."""


class PayloadError(Invalid):
    """A message whose payload lacks a field or has one of the wrong type: ``field: why``."""


def _checked(check: Any, body: Mapping[str, Any], key: str) -> Any:
    try:
        return check(key, body.get(key))
    except Invalid as e:
        raise PayloadError(e.field, e.why) from None


def body_card(body: Mapping[str, Any], key: str = "card") -> Card:
    token = body.get(key)
    if not isinstance(token, str):
        raise PayloadError(key, f"expected a card string, got {show(token)}")
    try:
        return parse_card(token)
    except CardError as e:
        raise PayloadError(key, str(e)) from e


def body_int(body: Mapping[str, Any], key: str, *, optional: bool = False) -> int | None:
    """A count: an integer, 0 or more."""
    if optional and body.get(key) is None:
        return None
    return _checked(check_int, body, key)


def body_str(body: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    if optional and body.get(key) is None:
        return None
    return _checked(check_text, body, key)


def body_bool(body: Mapping[str, Any], key: str) -> bool:
    return _checked(check_bool, body, key)


def unreadable(body: Mapping[str, Any]) -> bool:
    """The device says it could not read the card (``{"unreadable": true}``)."""
    return body.get("unreadable") is True
