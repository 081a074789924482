"""The bundled procedure profiles against the seeds, and the loader's error messages.

The expected facts below are written out from the seeds (PROCEDURES.md §1 and the
paragraphs cited in each profile), not read back from the code.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

from controller.profiles import (  # noqa: E402
    PROFILE_DIR,
    ProfileError,
    load_profile,
    load_profile_file,
    profile_from_dict,
    profile_names,
    schema_rows,
)

DOC = ROOT / "docs" / "profiles.md"

NAMES = [
    "gr-blackjack",
    "gr-blackjack-shuffler",
    "gr-chemin-de-fer",
    "gr-baccarat-two-tableaux",
    "gr-banco-punto",
    "gr-banco-punto-shuffler",
    "gr-stud-poker",
    "live-baccarat",
    "live-blackjack",
    "ru-blackjack",
]

SECTIONS = [
    "decks", "inspection", "deck_lifecycle", "shuffle", "cut",
    "cut_card", "burn", "exposed_card", "shuffler",
]

# name: (game, card_source, decks (min, max), cut card window, burn mode)
FACTS = {
    "gr-blackjack": ("blackjack", "shoe", (4, 6), (39, 65), "five"),
    "gr-blackjack-shuffler": ("blackjack", "shuffler", (4, 6), None, "five"),
    "gr-chemin-de-fer": ("chemin-de-fer", "shoe", (6, 8), (10, 10), "none"),
    "gr-baccarat-two-tableaux": ("baccarat-two-tableaux", "shoe", (6, 8), (10, 10), "none"),
    "gr-banco-punto": ("baccarat", "shoe", (6, 8), (7, 7), "by-value"),
    "gr-banco-punto-shuffler": ("baccarat", "shuffler", (6, 8), None, "by-value"),
    "gr-stud-poker": ("stud-poker", "hand", (1, 1), None, "none"),
    "live-baccarat": ("baccarat", "shoe", (8, 8), (7, 7), "none"),
    "live-blackjack": ("blackjack", "shoe", (8, 8), (195, 221), "none"),
    "ru-blackjack": ("blackjack", "shoe", (6, 6), (137, 163), "five"),
}

# name: (exposed handling, exposed first card of round)
EXPOSED = {
    "gr-blackjack": ("burn", "continue"),
    "gr-blackjack-shuffler": ("burn", "continue"),
    "gr-chemin-de-fer": ("use", "continue"),
    "gr-baccarat-two-tableaux": ("use", "continue"),
    "gr-banco-punto": ("use", "dummy-round"),
    "gr-banco-punto-shuffler": ("use", "dummy-round"),
    "gr-stud-poker": ("use", "continue"),
    "live-baccarat": ("use", "dummy-round"),
    "live-blackjack": ("burn", "continue"),
    "ru-blackjack": ("burn", "continue"),
}

# Profiles whose cut card showing as the first card of a round stops play (001 §2 reading).
NO_ROUND = {"gr-chemin-de-fer", "gr-baccarat-two-tableaux"}
WITH_CUT_CARD = {n for n, f in FACTS.items() if f[3] is not None}

SEED_CITATION = re.compile(r"^00[0-4] (BP )?§")


def _raw(name: str = "gr-banco-punto") -> dict:
    return tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text(encoding="utf-8"))


def _error(raw: dict, file: str = "x.toml") -> ProfileError:
    with pytest.raises(ProfileError) as info:
        profile_from_dict(raw, file)
    return info.value


def _dump(raw: dict) -> str:
    """A minimal TOML writer for the flat profile shape (strings, ints, bools, one level)."""

    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"{k} = {value(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines.extend(f"{sk} = {value(sv)}" for sk, sv in v.items())
    return "\n".join(lines) + "\n"


# --- the ten bundled profiles -------------------------------------------------------


def test_exactly_the_ten_profile_files():
    files = sorted(p.name for p in PROFILE_DIR.glob("*.toml"))
    assert files == sorted(f"{n}.toml" for n in NAMES)
    assert profile_names() == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_profile_loads_and_name_is_file_stem(name):
    profile = load_profile(name)
    assert profile.name == name
    assert Path(profile.path).stem == name
    assert load_profile_file(PROFILE_DIR / f"{name}.toml") == profile


@pytest.mark.parametrize("name", NAMES)
def test_game_card_source_decks_window_burn(name):
    game, card_source, decks, window, burn = FACTS[name]
    p = load_profile(name)
    assert p.game == game
    assert p.card_source == card_source
    assert (p.decks.min, p.decks.max) == decks
    assert p.cut_card.window() == window
    assert p.burn.mode == burn


@pytest.mark.parametrize("name", NAMES)
def test_exposed_card_handling(name):
    p = load_profile(name)
    assert (p.exposed_card.handling, p.exposed_card.first_card_of_round) == EXPOSED[name]


@pytest.mark.parametrize("name", sorted(WITH_CUT_CARD))
def test_last_hand_rule(name):
    expected = "no-round" if name in NO_ROUND else "round-is-last"
    assert load_profile(name).cut_card.first_card_of_round == expected


def test_cut_card_modes():
    modes = {n: load_profile(n).cut_card.mode for n in NAMES}
    assert modes == {
        "gr-blackjack": "approximate",
        "gr-blackjack-shuffler": "none",
        "gr-chemin-de-fer": "exact",
        "gr-baccarat-two-tableaux": "exact",
        "gr-banco-punto": "exact",
        "gr-banco-punto-shuffler": "none",
        "gr-stud-poker": "none",
        "live-baccarat": "exact",
        "live-blackjack": "approximate",
        "ru-blackjack": "approximate",
    }


def test_cut_rules():
    # 000 §3 (kept by §10): at least one deck each side; elsewhere anywhere.
    for name in NAMES:
        cut = load_profile(name).cut
        assert cut.required, name
        expected = 52 if name.startswith("gr-blackjack") else 1
        assert cut.min_each_side == expected, name


def test_burn_details():
    ru = load_profile("ru-blackjack").burn
    assert ru.on_dealer_change == 1  # 004 §3.8
    for name in NAMES:
        if name != "ru-blackjack":
            assert load_profile(name).burn.on_dealer_change == 0, name
    for name in ("gr-banco-punto", "gr-banco-punto-shuffler"):
        assert load_profile(name).burn.ten_value == 10, name


def test_shuffler_profiles():
    for name in NAMES:
        p = load_profile(name)
        is_shuffler = name in ("gr-blackjack-shuffler", "gr-banco-punto-shuffler")
        assert p.shuffler.continuous is is_shuffler, name
        assert p.shuffler.discards_every_round is is_shuffler, name
        assert p.shuffler_mode is is_shuffler, name


def test_two_tableaux_new_cards_every_shoe_only():
    for name in NAMES:
        expected = name == "gr-baccarat-two-tableaux"  # 001 §2
        assert load_profile(name).deck_lifecycle.new_cards_every_shoe is expected, name


def test_stud_poker_shuffles_every_round_only():
    for name in NAMES:
        expected = name == "gr-stud-poker"  # 003 §2–3
        assert load_profile(name).shuffle.every_round is expected, name


@pytest.mark.parametrize("name", NAMES)
def test_inspection_and_deck_lifecycle(name):
    p = load_profile(name)
    assert p.inspection.opening_check is True
    assert p.inspection.closing_check is True
    assert p.deck_lifecycle.plastic_max_days == 10
    assert p.deck_lifecycle.plastic_day_count == "elapsed"
    assert p.deck_lifecycle.paper_same_day_only is True
    # a DECK_EXPIRED cites this section: it names a paragraph that holds the age limit
    # (PROCEDURES §2.1: 000 §1, 001 BP §1, 003 §1), the seed's own or the one applied
    assert re.search(r"(000|001 BP|003) §1(?![\d.])", p.deck_lifecycle.source), \
        p.deck_lifecycle.source


@pytest.mark.parametrize("name", NAMES)
def test_every_source_is_a_seed_citation(name):
    p = load_profile(name)
    assert SEED_CITATION.match(p.source), p.source
    for section in SECTIONS:
        src = getattr(p, section).source
        assert src.strip() and SEED_CITATION.match(src), f"{name} {section}: {src!r}"
        interp = getattr(p, section).interpretation
        assert interp is None or interp.strip(), f"{name} {section}"


def test_key_citations():
    assert load_profile("gr-banco-punto").cut_card.source.startswith("001 BP §8")
    assert load_profile("gr-banco-punto").burn.source == "001 BP §9"
    assert load_profile("gr-banco-punto").exposed_card.source == "001 BP §5"
    assert "3.3.4" in load_profile("live-baccarat").cut_card.source
    assert "3.5.4" in load_profile("live-baccarat").cut_card.source
    assert load_profile("ru-blackjack").burn.source == "004 §3.8"
    assert "§3.17" in load_profile("ru-blackjack").cut_card.source
    assert load_profile("gr-blackjack").cut.source == "000 §3"


# --- validation errors --------------------------------------------------------------


def test_real_dict_is_valid():
    assert profile_from_dict(_raw(), "x.toml").name == "gr-banco-punto"


def test_unknown_top_level_key():
    raw = _raw()
    raw["tables"] = 3
    assert str(_error(raw)) == "x.toml: tables: unknown key"


def test_unknown_section_key():
    raw = _raw()
    raw["burn"]["colour"] = "red"
    err = _error(raw)
    assert err.key == "burn.colour"
    assert str(err) == "x.toml: burn.colour: unknown key"


def test_missing_section_key():
    raw = _raw()
    del raw["burn"]["mode"]
    assert str(_error(raw)) == "x.toml: burn.mode: missing"


def test_missing_source_in_section():
    raw = _raw()
    del raw["cut"]["source"]
    assert str(_error(raw)) == "x.toml: cut.source: missing"


def test_interpretation_is_optional():
    raw = _raw("gr-blackjack")
    assert "interpretation" in raw["cut_card"]
    del raw["cut_card"]["interpretation"]
    assert profile_from_dict(raw, "x.toml").cut_card.interpretation is None


def test_missing_top_level_key():
    raw = _raw()
    del raw["card_source"]
    assert str(_error(raw)) == "x.toml: card_source: missing"


def test_missing_section():
    raw = _raw()
    del raw["exposed_card"]
    assert str(_error(raw)) == "x.toml: exposed_card: missing"


def test_section_that_is_not_a_table():
    raw = _raw()
    raw["decks"] = 8
    assert str(_error(raw)) == "x.toml: decks: expected a table [decks]"


def test_out_of_range_int():
    raw = _raw()
    raw["decks"]["max"] = 99
    assert str(_error(raw)) == "x.toml: decks.max: 99 is out of range 1..12"


def test_hand_order_needs_hand_piles():
    raw = _raw()  # gr-banco-punto: round piles (the baccarat direction is each dealer's)
    raw["shuffle_screen"]["hand_order"] = "all"
    assert str(_error(raw)).startswith(
        "x.toml: shuffle_screen.hand_order: 'all' holds each hand's cards in order: it needs "
        "hand_piles = true")
    raw["shuffle_screen"]["hand_order"] = "sideways"
    assert "is not one of pile, dealt, reversed, either, all" in str(_error(raw))


def test_bad_choice():
    raw = _raw()
    raw["burn"]["mode"] = "six"
    assert str(_error(raw)) == "x.toml: burn.mode: 'six' is not one of none, five, by-value"


def test_bad_top_level_choice():
    raw = _raw()
    raw["game"] = "poker"
    err = _error(raw)
    assert err.key == "game"
    assert str(err).startswith("x.toml: game: 'poker' is not one of blackjack, ")


def test_bool_given_as_int():
    raw = _raw()
    raw["cut"]["required"] = 1
    assert str(_error(raw)) == "x.toml: cut.required: expected true or false, got 1"


def test_int_given_as_bool():
    raw = _raw()
    raw["decks"]["min"] = True
    assert str(_error(raw)) == "x.toml: decks.min: expected an integer, got True"


def test_empty_string():
    raw = _raw()
    raw["burn"]["source"] = " "
    assert str(_error(raw)) == "x.toml: burn.source: expected a non-empty string, got ' '"


def test_decks_min_above_max():
    raw = _raw()
    raw["decks"]["min"], raw["decks"]["max"] = 8, 6
    assert str(_error(raw)) == "x.toml: decks.min: 8 is more than decks.max 6"


def test_exact_cut_card_with_tolerance():
    raw = _raw()
    assert raw["cut_card"]["mode"] == "exact"
    raw["cut_card"]["tolerance"] = 2
    assert str(_error(raw)) == (
        "x.toml: cut_card.tolerance: must be 0 when cut_card.mode is 'exact'"
    )


def test_no_cut_card_with_behind():
    raw = _raw("gr-blackjack-shuffler")
    raw["cut_card"]["behind"] = 7
    assert str(_error(raw)) == "x.toml: cut_card.behind: must be 0 when cut_card.mode is 'none'"


def test_shuffler_flag_must_match_card_source():
    raw = copy.deepcopy(_raw())
    raw["shuffler"]["continuous"] = True
    err = _error(raw)
    assert err.key == "shuffler.continuous"
    assert str(err) == (
        "x.toml: shuffler.continuous: must be true exactly when card_source is 'shuffler'"
    )


def test_name_differs_from_file_stem(tmp_path):
    path = tmp_path / "other-name.toml"
    path.write_text((PROFILE_DIR / "gr-banco-punto.toml").read_text(encoding="utf-8"),
                    encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    assert info.value.key == "name"
    assert str(info.value) == f"{path}: name: 'gr-banco-punto' differs from the file name"


def test_file_errors_name_the_file_and_key(tmp_path):
    raw = _raw()
    raw["burn"]["mode"] = "six"
    path = tmp_path / "gr-banco-punto.toml"
    path.write_text(_dump(raw), encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    assert str(info.value) == f"{path}: burn.mode: 'six' is not one of none, five, by-value"
    # and the writer itself round-trips a valid profile
    path.write_text(_dump(_raw()), encoding="utf-8")
    assert load_profile_file(path) == load_profile("gr-banco-punto")


def test_invalid_toml_reports_the_line(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('name = "broken"\n[decks\nmin = 1\n', encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not valid TOML: ")
    assert "line 2" in message


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.toml"
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    assert str(info.value) == f"{path}: cannot read: No such file or directory"


def test_unreadable_file(tmp_path):
    path = tmp_path / "dir.toml"
    path.mkdir()
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    assert str(info.value).startswith(f"{path}: cannot read: ")


@pytest.mark.parametrize(("text", "why"), [
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "is longer than 8192 bytes"),  # one line
    ("a = [\n" + "[\n" * 5000 + "]\n" * 5001, "nested too deep to read"),  # many lines
    ("a." * 20_000 + "b = 1\n", "is longer than 8192 bytes"),  # tomllib: quadratic
    ("# x\n" * 70_000, "larger than 256 KB"),
])
def test_a_file_no_profile_could_be_is_refused_in_one_line(tmp_path: Path, text: str,
                                                            why: str) -> None:
    # each ran Python's TOML parser into a RecursionError traceback, or for seconds into
    # gigabytes (a review)
    path = tmp_path / "odd.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    assert str(info.value).startswith(f"{path}: ") and why in str(info.value)


def test_a_device_or_pipe_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)  # opened, it would wait for a writer for ever
    for path in (Path("/dev/zero"), fifo):  # /dev/zero: read until memory ran out
        with pytest.raises(ProfileError) as info:
            load_profile_file(path)
        assert str(info.value) == f"{path}: cannot read: not a regular file"


def test_unknown_profile_name():
    with pytest.raises(ProfileError) as info:
        load_profile("no-such-game")
    message = str(info.value)
    assert "no profile named 'no-such-game'" in message
    assert "gr-blackjack" in message


# --- documentation ------------------------------------------------------------------


def test_every_schema_key_is_documented():
    doc = DOC.read_text(encoding="utf-8")
    missing = [key for key, _, _ in schema_rows() if f"`{key}`" not in doc]
    assert not missing


def test_every_profile_is_documented():
    doc = DOC.read_text(encoding="utf-8")
    assert [n for n in NAMES if f"`{n}`" not in doc] == []


def test_non_utf8_profile_is_a_profile_error(tmp_path: Path) -> None:
    bad = tmp_path / "latin.toml"
    bad.write_bytes(b'# a profile\nname = "caf\xe9"\n')
    with pytest.raises(ProfileError) as info:
        load_profile_file(bad)
    assert str(info.value).startswith(f"{bad}: not valid TOML: not UTF-8 text")
    assert str(info.value).endswith("(at line 2, column 12)")  # where, not a byte offset
