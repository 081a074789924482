"""The dealer console of ``shoewarden run``: one line per command, testable through stdin.

A command is a letter, optionally followed by its values on the same line (``c 120``).
A required value that is not on the line is asked for on the next line; optional values
are only taken from the line, so piped input never has a question eat a command.

====  =======================  ===============================================
key   input event              values
====  =======================  ===============================================
o     table_open               [decks] [sabot]  (decks: the config's, else the
                                                profile's maximum)
s     shuffle                  (a hand shuffle; a shuffler reports its own)
c     cut                      offset (asked)
p     cut_card_placed          [cards behind it]
l     shoe_loaded
b     bets_closed              blackjack: boxes in dealing order (asked, e.g.
                               ``1 3 5``); stud poker: players (asked)
a     action                   stand | double | split | surrender | accept |
                               decline (asked)
n     stub_count               count (asked)
e     round_end
r     discards_returned        count (asked)
d     dealer_change            dealer id (asked)
x     players_left
m     card                     a card read by hand, e.g. ``7H`` (asked)
k     device_ok                device and code of the fault a person dealt with
                               (asked; ``k shoe JAM``)
q     table_close
====  =======================  ===============================================

Also: a line starting with ``{`` is one input event as JSON (docs/events.md); ``?`` (or
``h``) lists the commands; an empty line shows the state; ``quit`` stops the controller
without closing the table (the log stays open for the next start).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller import jsontext
from controller.events import ACTIONS, Event, EventError, parse_event
from controller.jsontext import JsonTextError
from controller.profiles import Profile

HELP = """commands (values may follow on the same line):
  o [decks] [sabot]  open the table        s  shuffle (by hand)
  c OFFSET           cut                   p [BEHIND]  cut card placed
  l                  shoe loaded           b  bets closed (asks boxes / players)
  a ACTION           action                n COUNT  stub count (stud poker)
  e                  round end             r COUNT  discards returned
  d DEALER           dealer change         x  players left
  m CARD             a card read by hand   k DEVICE CODE  a fault was dealt with
  q                  close the table       {json}  any input event
  (empty line) state    ?  this help       quit  stop the controller (table stays open)"""


class CommandKind(StrEnum):
    """What a console line asks for (equal to its plain string)."""

    EVENT = "event"  # an input event to feed
    CLEAR = "clear"  # a person cleared a latched device fault
    HELP = "help"  # show the commands
    STATUS = "status"  # show the state
    QUIT = "quit"  # stop the controller (the table stays open)
    ERROR = "error"  # a line that is not a command: ``message`` says why


@dataclass(frozen=True)
class Command:
    """What a console line asks for: an event to feed, or one of the console's own."""

    kind: CommandKind
    event: Event | None = None
    device: str = ""
    code: str = ""
    message: str = ""


Ask = Callable[[str], "str | None"]


class DealerConsole:
    """Turns console lines into input events for one table."""

    def __init__(self, profile: Profile, table: str, decks: int | None = None,
                 clock: Callable[[], str] | None = None) -> None:
        self.profile = profile
        self.table = table
        self.decks = decks or profile.decks.max
        self.clock = clock

    def _event(self, obj: dict[str, Any]) -> Command:
        if self.clock is not None and "t" not in obj:
            obj["t"] = self.clock()
        if obj.get("type") == "table_open":
            obj.setdefault("table", self.table)  # this console's table
        if obj.get("type") == "device_ok" and obj.get("code") == "DEVICE_IDENTITY":
            return Command(CommandKind.ERROR,
                           message="a refused device clears DEVICE_IDENTITY itself, "
                           "by identifying as an allowed device: `k DEVICE DEVICE_IDENTITY` "
                           "tries it again")
        try:
            return Command(CommandKind.EVENT, parse_event(obj))
        except EventError as e:
            kind = obj.get("type")
            return Command(CommandKind.ERROR, message=f"{kind}: {e}" if isinstance(kind, str) and
                           len(kind) < 40 else str(e))

    def parse(self, line: str, ask: Ask) -> Command:
        """One console line (``ask(question)`` reads an answer line; None at the end)."""
        text = line.strip()
        if not text:
            return Command(CommandKind.STATUS)
        try:
            text.encode("utf-8")  # stdin is read with surrogateescape: bad bytes arrive here
        except UnicodeEncodeError:
            return Command(CommandKind.ERROR, message="not UTF-8 text: the line was refused")
        if len(text) > MAX_LINE:
            return Command(CommandKind.ERROR, message=f"a line longer than {MAX_LINE} characters")
        if text.startswith("{"):
            try:
                obj = jsontext.loads(text)
            except JsonTextError as e:
                return Command(CommandKind.ERROR, message=str(e))
            if not isinstance(obj, dict):
                return Command(CommandKind.ERROR, message="expected a JSON object")
            return self._event(obj)
        word, *args = text.split()
        word = word.lower()
        if word in ("?", "h", "help"):
            return Command(CommandKind.HELP, message=HELP)
        if word == "quit":
            return Command(CommandKind.QUIT)

        def value(question: str) -> str | None:
            if args:
                return " ".join(args)
            answer = ask(question)
            return None if answer is None else answer.strip()

        def number(question: str) -> int | None:
            raw = value(question)
            return None if raw is None else _number(raw)

        simple = {"s": "shuffle", "l": "shoe_loaded", "e": "round_end", "x": "players_left",
                  "q": "table_close"}
        if word in simple:
            return self._event({"type": simple[word]})
        if word == "o":
            decks = _number(args[0]) if args else self.decks
            if decks is None:
                return Command(CommandKind.ERROR,
                               message="open: DECKS is a number of decks, e.g. o 6")
            obj = {"type": "table_open", "table": self.table, "decks": decks}
            if len(args) > 1:
                obj["sabot"] = args[1]
            return self._event(obj)
        if word == "c":
            offset = number("cut offset (cards lifted off the top)? ")
            if offset is None:
                return Command(CommandKind.ERROR, message="cut: an offset is needed, e.g. c 120")
            return self._event({"type": "cut", "offset": offset})
        if word == "p":
            obj = {"type": "cut_card_placed"}
            if args:
                behind = _number(args[0])
                if behind is None:
                    return Command(CommandKind.ERROR,
                                   message="cut card: BEHIND is a number of cards")
                obj["behind"] = behind
            return self._event(obj)
        if word == "b":
            return self._bets(args, ask)
        if word == "a":
            action = value(f"action ({', '.join(ACTIONS)})? ")
            if not action:
                return Command(CommandKind.ERROR, message="action: which one?")
            return self._event({"type": "action", "action": action.lower()})
        if word in ("n", "r"):
            kind = "stub_count" if word == "n" else "discards_returned"
            count = number("count? ")
            if count is None:
                return Command(CommandKind.ERROR, message=f"{kind}: a count is needed")
            return self._event({"type": kind, "count": count})
        if word == "d":
            dealer = value("dealer id? ")
            if not dealer:
                return Command(CommandKind.ERROR, message="dealer change: a dealer id is needed")
            return self._event({"type": "dealer_change", "dealer": dealer})
        if word == "m":
            card = value("card (e.g. 7H)? ")
            if not card:
                return Command(CommandKind.ERROR, message="card: which card?")
            return self._event({"type": "card", "card": card})
        if word == "k":
            raw = value("which fault was dealt with (DEVICE CODE)? ")
            parts = (raw or "").replace(":", " ").split()
            if len(parts) != 2 or not _NAME.fullmatch(parts[0]) \
                    or not _NAME.fullmatch(parts[1]):
                return Command(CommandKind.ERROR,
                               message="fault cleared: give DEVICE CODE, e.g. k shoe JAM")
            return Command(CommandKind.CLEAR, device=parts[0], code=parts[1].upper())
        return Command(CommandKind.ERROR, message=f"unknown command {word!r} (? lists them)")

    def _bets(self, args: list[str], ask: Ask) -> Command:
        game = self.profile.game
        obj: dict[str, Any] = {"type": "bets_closed"}
        if game == "blackjack":
            raw = " ".join(args) if args else (ask("boxes in dealing order (e.g. 1 3 5)? ")
                                              or "")
            boxes = raw.replace(",", " ").split()
            numbers = [_number(b) for b in boxes]
            if None in numbers:
                return Command(CommandKind.ERROR,
                               message="bets closed: boxes are numbers, e.g. b 1 3 5")
            if numbers:
                obj["boxes"] = numbers
        elif game == "stud-poker":
            raw = args[0] if args else (ask("players with a bet? ") or "")
            players = _number(raw.strip())
            if players is None:
                return Command(CommandKind.ERROR, message="bets closed: how many players? e.g. b 4")
            obj["players"] = players
        return self._event(obj)


MAX_LINE = 20_000
"""Longest console line read (a deck check typed as JSON is about 2,000 characters)."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")
_DIGITS = re.compile(r"-?[0-9]{1,15}")


def _number(text: str) -> int | None:
    """A number typed at the console: ASCII digits only (``"²".isdigit()`` is true, and
    ``int()`` of 5,000 digits raises), at most 15 of them."""
    return int(text) if _DIGITS.fullmatch(text) else None
