"""Procedure profiles: every rule the engine enforces, as data, each beside its seed paragraph.

A profile is a TOML file in ``config/profiles/``. Every section carries
``source`` (the seed paragraph, e.g. ``"000 §6"``) and may carry
``interpretation`` (why an ambiguous seed was read this way). Every other key is
required; unknown keys, missing keys and out-of-range values are rejected with
``file: key: what is wrong``. The schema below *is* the validation: each field's
type gives its allowed words (a ``Literal``) and its metadata the range of a number,
both checked by :mod:`controller.validation`, so docs/profiles.md, the loader and the
engine cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_type_hints

from controller.configfile import ConfigFileError, check_stem, find_named, names_in, read_toml
from controller.screening.reference import HandOrder
from controller.validation import Invalid, allowed_text, checker, choices

Game = Literal["blackjack", "baccarat", "chemin-de-fer", "baccarat-two-tableaux", "stud-poker"]
CardSource = Literal["shoe", "shuffler", "hand"]
DayCount = Literal["elapsed", "calendar"]
CutCardMode = Literal["none", "exact", "approximate"]
CutCardFirst = Literal["round-is-last", "no-round"]
BurnMode = Literal["none", "five", "by-value"]
ExposedHandling = Literal["burn", "use"]
ExposedFirst = Literal["continue", "dummy-round"]
Tableau = Literal["punto-banco", "chemin-de-fer", "none"]
BankStood = Literal["draw", "option"]
Peek = Literal["none", "ace"]
SplitSecondCards = Literal["sequential", "both-first", "either"]
Double = Literal["none", "total-11-or-less", "any-two"]
DoubleAce = Literal["eleven", "one-or-eleven"]
Surrender = Literal["none", "before-third-card-not-vs-ace"]
DealerQualifies = Literal["ace-king"]

GAMES: tuple[str, ...] = choices(Game)
CARD_SOURCES: tuple[str, ...] = choices(CardSource)

PROFILE_DIR = Path(__file__).resolve().parent.parent / "config" / "profiles"


class ProfileError(ConfigFileError):
    """A profile that cannot be loaded: ``file: key: what is wrong``."""


def _opt(doc: str) -> Any:
    """A word: the field's ``Literal`` type lists the allowed ones."""
    return field(metadata={"doc": doc})


def _num(lo: int, hi: int, doc: str) -> Any:
    return field(metadata={"min": lo, "max": hi, "doc": doc})


def _flag(doc: str) -> Any:
    return field(metadata={"doc": doc})


def _later(default: Any, doc: str, lo: int | None = None, hi: int | None = None) -> Any:
    """A key added after logs were first written: optional, and where a profile (a log's
    header) does not name it, ``default`` — the behaviour such a log was decided with."""
    bounds = {} if lo is None else {"min": lo, "max": hi}
    return field(default=default, metadata={"optional": True, **bounds, "doc": doc})


@dataclass(frozen=True)
class Section:
    """Common to every section: where the rule lives in the seeds."""

    source: str = field(metadata={"doc": "seed paragraph(s) the section implements"})
    interpretation: str | None = field(
        default=None, kw_only=True,
        metadata={"doc": "optional: how an ambiguous seed was read", "optional": True},
    )


@dataclass(frozen=True)
class Decks(Section):
    min: int = _num(1, 12, "fewest decks allowed")
    max: int = _num(1, 12, "most decks allowed")


@dataclass(frozen=True)
class Inspection(Section):
    opening_check: bool = _flag("a composition check (deck_check) is required at table opening")
    closing_check: bool = _flag("a composition check is required before table_close")


@dataclass(frozen=True)
class DeckLifecycle(Section):
    plastic_max_days: int = _num(1, 365, "plastic decks: usable this many days from first use")
    plastic_day_count: DayCount = _opt(
        doc="elapsed: expired when open date − first use > max days; "
        "calendar: the day of first use counts as day 1",
    )
    paper_same_day_only: bool = _flag("paper decks only on the day they were first used")
    new_cards_every_shoe: bool = _flag("every shoe (sequence) must use lots not used before")
    paper_until_close: bool = _later(
        False, "paper decks are destroyed when the table closes: a paper lot in play at a "
        "closing is refused at a later opening, the same day too")


@dataclass(frozen=True)
class Shuffling(Section):
    every_round: bool = _flag("each round needs its own shuffle and cut (stud poker)")
    restart_source: str | None = _later(
        None, "seed paragraph(s) that restart the whole procedure at the shuffle when a "
        "player comes after the players left (000 §9, 001 BP §17, 003 §11): the rule a "
        "restart skipped breaks (SHUFFLE_MISSING); none: the section's source")


@dataclass(frozen=True)
class CutRule(Section):
    required: bool = _flag("the pack must be cut after every shuffle")
    min_each_side: int = _num(0, 416, "fewest cards each side of the cut (1 = anywhere)")


@dataclass(frozen=True)
class CutCardRule(Section):
    mode: CutCardMode = _opt(doc="no cut card, or its window kind")
    behind: int = _num(0, 416, "cards behind the cut card (0 when mode is none)")
    tolerance: int = _num(0, 416, "± cards accepted around `behind` (0 when exact)")
    first_card_of_round: CutCardFirst = _opt(
        doc="cut card showing as the first card of a round: that round is played and is the "
        "last (001 BP §16), or no further round is dealt (001 §2 reading)",
    )

    def window(self) -> tuple[int, int] | None:
        if self.mode == "none":
            return None
        return (max(0, self.behind - self.tolerance), self.behind + self.tolerance)


@dataclass(frozen=True)
class BurnRule(Section):
    mode: BurnMode = _opt(doc="cards burned after every load")
    ten_value: int = _num(1, 10, "by-value burn: how many cards a 10/J/Q/K stands for")
    on_dealer_change: int = _num(0, 10, "cards burned before the next round on a dealer change")


@dataclass(frozen=True)
class ExposedCardRule(Section):
    handling: ExposedHandling = _opt(doc="an exposed card is burned, or used in the hand")
    first_card_of_round: ExposedFirst = _opt(
        doc="first card of a round exposed: play on, or finish it as a dummy round",
    )


@dataclass(frozen=True)
class ShufflerRule(Section):
    continuous: bool = _flag("a continuous shuffler that also deals (card_source = shuffler)")
    discards_every_round: bool = _flag("every round's cards go back before the next round")
    burns_returned: bool = _later(
        True, "the burned cards go back with a round's cards (a count without them is "
        "refused); false: they stay in the discard holder until the cards are withdrawn "
        "(000 §10: the first five go to the Discard Holder before the dealing, and the cards "
        "'used or burned in that round' go back; 001 BP §20δ(3), δ(6), δ(7)(3): only each "
        "hand's used cards go back), and a count that includes them is accepted too (it "
        "loses no card). true in a profile recorded before the key existed")


@dataclass(frozen=True)
class DealingRule(Section):
    """How rounds are dealt. The game referees (baccarat tableau, blackjack hands, stud
    counts) add their settings here."""

    bets_close_before_cards: bool = _flag(
        "no card but a burn leaves the shoe before bets are closed")
    boxes: int = _later(0, "blackjack: the boxes on the layout, numbered from 1; a bet on a "
                        "box beyond them is BOX_COUNT (0: not checked)", 0, 64)


@dataclass(frozen=True)
class ShuffleScreenRule(Section):
    """Shuffle screening (docs/shuffle-screening.md): the dealt order held against the
    order the pack was in before the shuffle."""

    enabled: bool = _flag("screen every shoe's dealt order for an unshuffled, weakly "
                          "shuffled or falsely shuffled pack (SHUFFLE_SUSPECT)")
    false_alarm_one_in: int = _num(1_000, 1_000_000_000_000,
                                   "the whole screen's false alarm rate: at most one in "
                                   "this many fairly shuffled shoes")
    run_test: bool = _flag("the run test: long runs of the reference order (an unshuffled "
                           "or cut-only pack, a slug kept from the last shoe)")
    continuation_test: bool = _flag("the continuation test: cards that keep continuing the "
                                    "reference among the last few (riffles, weak shuffles)")
    previous_shoe: bool = _flag("also hold each shoe against the previous shoe's discards "
                                "(piles by round, or by hand: hand_piles), not only against "
                                "new-deck order")
    shelf_test: bool = _later(
        False, "the shelf test: the dealt order against one pass of a shelf shuffler "
        "(interleaved rising and falling runs of new-deck order); no seed names such a "
        "machine, so off unless set (and off in a profile recorded before it existed)")
    hand_piles: bool = _later(
        False, "the previous shoe's discards as one pile per hand (collected hand by hand, "
        "one on another, so that the hands can be laid out again: 002 §2 3.6, §3 3.6) "
        "rather than one per round; off in a profile recorded before it existed")
    packet_test: bool = _later(
        False, "the packet test: the dealt order against riffled packets of the previous "
        "shoe's discards, followed through their piles (with previous_shoe); off in a "
        "profile recorded before it existed")
    hand_order: HandOrder = _later(
        "pile", "with hand_piles, how the packet test holds each hand's cards in the "
        "discards: pile — in no known order; dealt — in the order dealt; reversed — the "
        "reverse; either — dealt or reversed, all — any of the three (each followed, the "
        "test's share of the budget split between them). The guide keeps a hand so that it "
        "can be laid out again (002 §3 3.6), not which way up; pile in a profile recorded "
        "before the key existed")
    packet_predictor: int = _later(
        1, "the packet test's predictor: 1 spreads a stream's share evenly over every face "
        "it goes to, 2 puts 0.8 of it on the faces of the piles the packet is in, the "
        "sharper (docs/shuffle-screening.md, test 4); 1 in a profile recorded before the key "
        "existed, so that its log replays as it was decided", 1, 2)
    early_batch: int = _later(
        16, "cards judged at a time within a shoe's first 40 cards (after its first 8): a "
        "pack only cut or riffled once crosses its threshold within 10-20 cards and is "
        "raised at most this many cards less one later; later in the shoe every 16 (each "
        "judgement costs a few µs); 16 in a profile recorded before the key existed, so that "
        "its log replays as it was decided", 2, 16)
    packet_stop: int = _later(
        0, "the packet test's futility bound, in nats: once every one of its predictors has "
        "fallen this far below even, the test follows that shoe no further (a riffled pack's "
        "never fell below 4.3 before it was found in the runs measured; a well-shuffled "
        "shoe's falls below 12 by about its 146th-188th card); a stopped test cannot raise a "
        "false alarm, so the false-alarm bound holds. 0: it follows the whole shoe, as in a "
        "profile recorded before the key existed", 0, 100)


@dataclass(frozen=True)
class BaccaratRule(Section):
    """Baccarat family: the drawing tableau the referee enforces, and shoe passing."""

    tableau: Tableau = _opt(
        doc="drawing rules checked at round_end (none: draws are not checked)")
    shoe_passing: bool = _flag("track who holds the shoe (001 BP §15; not Mini/Midi, "
                               "not with a shuffler)")
    seats: int = _later(
        12, "with shoe_passing, the seats the shoe passes round: after the last it goes back "
        "to seat 1 (001 BP §15 passes it to the next player on the right; the full table's "
        "seat count is not stated, §18 gives Mini 7 and Midi 9); 12 in a profile recorded "
        "before the key existed", 2, 64)
    bank_stood_3_4: BankStood = _later(
        "draw", "chemin de fer, the player stood: the bank on 3 or 4, which 001 §8 does not "
        "state (στ: 0–2 draw, η: 5 draws, ζ: 6 stands). draw — a lower total than a 5 that "
        "must draw must draw too, as in every standard tableau; option — the bank's "
        "choice, logged, never flagged. draw in a profile recorded before the key existed")


@dataclass(frozen=True)
class BlackjackRule(Section):
    """Blackjack family: the deal, the dealer's rule, and what players may do."""

    dealer_hole_card: bool = _flag("the dealer takes a second (hole) card in the initial deal")
    peek: Peek = _opt(doc="with a hole card: the dealer peeks when the up card "
                     "is an ace")
    dealer_stands_soft_17: bool = _flag("the dealer stands on every 17, soft 17 included")
    max_splits: int = _num(0, 3, "split actions allowed per box (1 = two hands)")
    split_aces_max: int = _num(0, 3, "split actions allowed on aces (each ace gets one card)")
    split_second_cards: SplitSecondCards = _opt(
        doc="after a split: play out the first hand before the second gets its card, deal "
        "both second cards first, or either (as the cards' `to` show; sequential without)")
    double: Double = _opt(doc="which two-card hands may double (one card only)")
    double_after_split: bool = _flag("a split hand may double")
    surrender: Surrender = _opt(doc="late surrender rule, if any")
    split_aces_one_card: bool = _later(
        True, "a split ace takes one card and is finished (000 §14, 004 §3.13); false where "
        "the casino lets split aces draw (002 §3 2.7 leaves it to the casino)")
    double_ace: DoubleAce = _later(
        "eleven", "with double = total-11-or-less, how a player's ace counts in the two-card "
        "total, which 000 §15 ('a total up to 11 with the first two cards') does not say: "
        "eleven — as the dealer announces the total (§12α), an ace 11 unless that busts, so "
        "a soft hand (A+2: 13) cannot double; one-or-eleven — the player's choice, as 1 (A+2: "
        "3, A+9: 10), so every soft hand may. eleven in a profile recorded before the key "
        "existed")


@dataclass(frozen=True)
class StudRule(Section):
    """Casino stud poker: the count check and the dealer's qualification."""

    dealer_qualifies: DealerQualifies = _opt(doc="weakest dealer hand that qualifies")
    raise_multiple: int = _num(1, 10, "the raise is this many times the ante")


SCREEN_ABSENT = ShuffleScreenRule(
    source="none: recorded before shuffle screening", enabled=False,
    false_alarm_one_in=1_000_000, run_test=False, continuation_test=False,
    previous_shoe=False)
"""The screen of a profile that has no ``[shuffle_screen]`` (an older log's header): off."""


GAME_SECTION = "game"
"""A deviation's section (``DeviationSpec.section``) that is the profile's game's section:
``[baccarat]``, ``[blackjack]`` or ``[stud]``, whichever the profile has."""
GAME_SECTIONS: dict[str, tuple[str, ...]] = {
    "baccarat": ("baccarat", "chemin-de-fer", "baccarat-two-tableaux"),
    "blackjack": ("blackjack",),
    "stud": ("stud-poker",),
}


@dataclass(frozen=True)
class Profile:
    """One procedure profile (PROCEDURES.md §1)."""

    name: str
    title: str
    source: str
    game: Game
    card_source: CardSource
    decks: Decks
    inspection: Inspection
    deck_lifecycle: DeckLifecycle
    shuffle: Shuffling
    cut: CutRule
    cut_card: CutCardRule
    burn: BurnRule
    exposed_card: ExposedCardRule
    shuffler: ShufflerRule
    dealing: DealingRule
    shuffle_screen: ShuffleScreenRule
    baccarat: BaccaratRule | None = None
    blackjack: BlackjackRule | None = None
    stud: StudRule | None = None
    path: str = field(default="", compare=False, repr=False)

    @property
    def shuffler_mode(self) -> bool:
        return self.card_source == "shuffler"

    @property
    def has_cut_card(self) -> bool:
        return self.cut_card.mode != "none"

    def rule(self, section: str) -> str:
        """``"<profile> <seed paragraph>"`` for a deviation's ``rule`` field. ``section``:
        a section of the profile, ``""`` for the profile's own source, or ``"game"`` for the
        section of the profile's game (a code two games raise, each under its own rule)."""
        if section == GAME_SECTION:
            section = next(s for s, games in GAME_SECTIONS.items() if self.game in games)
        src = getattr(self, section).source if section else self.source
        return f"{self.name} {src}"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("path")
        for section in GAME_SECTIONS:
            if out[section] is None:
                out.pop(section)
        for value in out.values():  # (optional text keys: absent, not null, when unset)
            if isinstance(value, dict):
                for key in ("interpretation", "restart_source"):
                    if value.get(key) is None:
                        value.pop(key, None)
        return out


def _check_value(file: str, key: str, value: Any, typ: Any, meta: Mapping[str, Any]) -> Any:
    try:
        return checker(typ, meta.get("min"), meta.get("max"))(key, value)
    except Invalid as e:
        raise ProfileError(file, key, e.why) from None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A section's field types, resolved once (``get_type_hints`` compiles every
    annotation of the class again at each call: a replay reads a profile at every
    header)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls)
    return hints


def _build_section(file: str, name: str, cls: type[Section], raw: Any) -> Section:
    if not isinstance(raw, dict):
        raise ProfileError(file, name, "expected a table [" + name + "]")
    hints = _hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in known:
            raise ProfileError(file, f"{name}.{key}", "unknown key")
    values = {}
    for fname, f in known.items():
        key = f"{name}.{fname}"
        if fname not in raw:
            if f.metadata.get("optional"):
                continue
            raise ProfileError(file, key, "missing")
        values[fname] = _check_value(file, key, raw[fname], hints[fname], f.metadata)
    return cls(**values)


def profile_from_dict(raw: dict[str, Any], file: str = "<profile>") -> Profile:
    """Validate a decoded TOML document and build the :class:`Profile`."""
    hints = _hints(Profile)
    known = {f.name for f in dataclasses.fields(Profile)} - {"path"}
    for key in raw:
        if key not in known:
            raise ProfileError(file, key, "unknown key")
    values: dict[str, Any] = {}
    game = raw.get("game")
    for fname in [f.name for f in dataclasses.fields(Profile) if f.name != "path"]:
        if fname in GAME_SECTIONS:
            if game not in GAME_SECTIONS[fname]:
                if fname in raw:
                    raise ProfileError(file, fname, f"only for {', '.join(GAME_SECTIONS[fname])}"
                                       f" games, not {game!r}")
                continue
            if fname not in raw:
                raise ProfileError(file, fname, f"missing (required for {game} games)")
            typ = {"baccarat": BaccaratRule, "blackjack": BlackjackRule, "stud": StudRule}[fname]
            values[fname] = _build_section(file, fname, typ, raw[fname])
            continue
        if fname not in raw and fname == "shuffle_screen":
            # a profile recorded before shuffle screening existed (an older log's header):
            # replaying it must reproduce its decisions, so its screen is off
            values[fname] = SCREEN_ABSENT
            continue
        if fname not in raw:
            raise ProfileError(file, fname, "missing")
        typ = hints[fname]
        if isinstance(typ, type) and issubclass(typ, Section):
            values[fname] = _build_section(file, fname, typ, raw[fname])
        else:
            values[fname] = _check_value(file, fname, raw[fname], typ, {})
    profile = Profile(**values, path=file)
    _cross_check(profile, file)
    return profile


def _cross_check(p: Profile, file: str) -> None:
    """Rules that involve more than one key."""
    if p.decks.min > p.decks.max:
        raise ProfileError(file, "decks.min", f"{p.decks.min} is more than decks.max {p.decks.max}")
    cc = p.cut_card
    if cc.mode == "none" and (cc.behind or cc.tolerance):
        raise ProfileError(file, "cut_card.behind", "must be 0 when cut_card.mode is 'none'")
    if cc.mode == "exact" and cc.tolerance:
        raise ProfileError(file, "cut_card.tolerance", "must be 0 when cut_card.mode is 'exact'")
    if cc.mode != "none" and cc.behind < 1:
        raise ProfileError(file, "cut_card.behind", "must be at least 1 with a cut card")
    if cc.mode != "none" and cc.behind >= p.decks.min * 52:
        raise ProfileError(
            file, "cut_card.behind", f"{cc.behind} is not less than the smallest pack "
            f"({p.decks.min} decks = {p.decks.min * 52} cards)",
        )
    if p.shuffler.continuous != (p.card_source == "shuffler"):
        raise ProfileError(
            file, "shuffler.continuous", "must be true exactly when card_source is 'shuffler'"
        )
    if p.card_source == "shuffler" and cc.mode != "none":
        raise ProfileError(file, "cut_card.mode", "a continuous shuffler uses no cut card")
    if p.card_source == "hand" and (cc.mode != "none" or p.burn.mode != "none"):
        raise ProfileError(
            file, "card_source", "hand-dealt games use neither a cut card nor a burn"
        )
    sc = p.shuffle_screen
    if sc.enabled and p.card_source == "shuffler":
        raise ProfileError(
            file, "shuffle_screen.enabled", "must be false with a continuous shuffler: its "
            "cards go back a round at a time, so no shoe has an order to screen")
    if sc.enabled and not (sc.run_test or sc.continuation_test):
        raise ProfileError(file, "shuffle_screen.run_test",
                           "an enabled screen needs run_test or continuation_test")
    if sc.hand_order != "pile" and not sc.hand_piles:
        raise ProfileError(file, "shuffle_screen.hand_order",
                           f"{sc.hand_order!r} holds each hand's cards in order: it needs "
                           "hand_piles = true (the discards as one pile per hand)")
    if p.cut.min_each_side * 2 > p.decks.min * 52:
        raise ProfileError(
            file, "cut.min_each_side",
            f"{p.cut.min_each_side} each side cannot fit in {p.decks.min * 52} cards",
        )


def load_profile_file(path: str | Path) -> Profile:
    path = Path(path)
    raw = read_toml(path, ProfileError)
    if "shuffle_screen" not in raw:  # only a log header written before it may lack it
        raise ProfileError(str(path), "shuffle_screen", "missing")
    profile = profile_from_dict(raw, str(path))
    check_stem(path, profile.name, ProfileError)
    return profile


def profile_names(directory: Path = PROFILE_DIR) -> list[str]:
    return names_in(directory)


def load_profile(name_or_path: str, directory: Path = PROFILE_DIR) -> Profile:
    """Load a bundled profile by name, or any profile file by path."""
    return load_profile_file(find_named(name_or_path, directory, "profile", ProfileError))


def schema_rows() -> list[tuple[str, str, str]]:
    """(key, allowed values, meaning) for every key: docs/profiles.md is checked against it."""
    rows = [
        ("name", "string", "the profile's name; must equal the file name"),
        ("title", "string", "a human title"),
        ("source", "string", "seed paragraphs the whole profile implements"),
        ("game", " | ".join(GAMES), "the game, which picks the dealing rules"),
        ("card_source", " | ".join(CARD_SOURCES), "where cards come from"),
    ]
    for f in dataclasses.fields(Profile):
        hints = get_type_hints(Profile)
        typ = {"baccarat": BaccaratRule, "blackjack": BlackjackRule,
               "stud": StudRule}.get(f.name, hints.get(f.name))
        if not (isinstance(typ, type) and issubclass(typ, Section)):
            continue
        sub_hints = get_type_hints(typ)
        for sf in dataclasses.fields(typ):
            meta = sf.metadata
            allowed = allowed_text(sub_hints[sf.name], meta.get("min"), meta.get("max"))
            if meta.get("optional"):
                allowed += " (optional)"
            rows.append((f"{f.name}.{sf.name}", allowed, meta.get("doc", "")))
    return rows
