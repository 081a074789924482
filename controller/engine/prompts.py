"""The dealer's next step, as the console shows it after every transition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.engine.states import (
    BURN,
    CLOSED,
    CLOSING_CHECK,
    CUT,
    CUT_CARD,
    LAST_ROUND,
    LOAD,
    OPENING_CHECK,
    READY,
    RETURN_DISCARDS,
    ROUND,
    SHOE_COMPLETE,
    SHUFFLE,
    SUSPENDED,
)

if TYPE_CHECKING:
    from controller.engine.day import DayState


def prompt_text(engine: DayState) -> str:
    """What the dealer does next, in ``engine``'s current state."""
    p = engine.profile
    s = engine.state
    shoe = engine.current_shoe
    if s == CLOSED:
        return "Table closed. Open the table to start."
    if s == OPENING_CHECK:
        return f"Count and verify the {engine.decks} deck(s) before play."
    if s == SHUFFLE:
        return "Shuffle the cards in view of a player."
    if s == CUT:
        need = p.cut.min_each_side
        return ("Offer the cut" + (f": at least {need} cards each side." if need > 1
                                   else ": anywhere."))
    if s == CUT_CARD:
        lo, hi = p.cut_card.window() or (0, 0)
        span = f"{lo}" if lo == hi else f"{lo}–{hi}"
        return f"Place the cut card with {span} cards behind it."
    if s == LOAD:
        return ("Load the stack into the shuffler." if p.shuffler_mode
                else "Load the stack into the shoe as it is.")
    if s == BURN:
        if shoe.burn_done and shoe.burn_due is not None:  # under way (the status line:
            # prompts are logged on a transition, when none is burned yet)
            left = max(0, shoe.burn_due - shoe.burn_done)
            return (f"Burn {left} more card(s): {shoe.burn_done} of {shoe.burn_due} "
                    "burned, the first included.")
        if shoe.burn_reason == "dealer_change":
            return f"Dealer change: burn {shoe.burn_due} card(s)."
        if shoe.burn_due is None:
            return "Burn by value: draw one card and burn as many as its value."
        return f"Burn {shoe.burn_due} card(s) unseen."
    if s == READY:
        return "Bets open." + (" Next round is the LAST HAND." if shoe.next_round_last
                               else " Close bets before dealing.")
    if s == ROUND:
        return f"Deal round {engine.round}."
    if s == LAST_ROUND:
        return f"Last hand: finish round {engine.round}, then reshuffle."
    if s == RETURN_DISCARDS:
        return (f"Return the round's {shoe.to_return(p.shuffler.burns_returned)} card(s) to "
                "the shuffler.")
    if s == SHOE_COMPLETE:
        return ("Shuffle and cut for the next round." if p.shuffle.every_round
                else "Shoe complete: reshuffle, or count the cards to close.")
    if s == CLOSING_CHECK:
        return "Pack counted: close the table, or shuffle to play on."
    if s == SUSPENDED:
        return "Cards withdrawn. When a player arrives, restart at the shuffle."
    faults = ", ".join(f"{d}:{c}" for (d, c) in engine.open_faults)
    return f"DEVICE FAULT ({faults}): stop play until it is cleared."
