"""Game referees: the dealing rules of each game, plugged into the engine per round.

Each module registers a referee for its game with
:func:`controller.rounds.register_referee`; importing this package loads them
all. A referee extends :class:`controller.rounds.CardLedger` and, like the
engine, is pure: cards and actions in, notes and deviations out.
"""

import importlib
import pkgutil

from controller import native

native.prefer_source(__name__)  # (before the imports: a stale compiled module never runs)

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
