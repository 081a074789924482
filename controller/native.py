"""Compiled modules: the card loops mypyc turns into C where a C compiler is at hand.

The shuffle screen judges every card the shoe reads, and its tests are loops over small
integers and bit sets: as Python bytecode they cost the engine 40–80 % of its time per
card, where issue 10 allows 10 %; the game referees judge every card of a round, a fifth
of the engine's time on baccarat, two fifths on blackjack (docs/architecture.md,
"Compiled modules"). mypyc
compiles the same type-checked source to C: the same operations on the same values in the
same order — Python's integers, IEEE doubles, libm's ``log`` — so compiled code decides
exactly as the source does (tests/test_native.py holds the two side by side over simulated
shoes and planted slips). Nothing else changes: the source is still the module's
definition, and a table without a compiler runs it as it is, more slowly.

``setup.py`` compiles :data:`COMPILED` (``pip install -e .``, ``make native``) and records
in ``controller/native.json`` the SHA-256 of each source it compiled. A compiled module
whose source has changed since (an edit, a checkout) is never used: :func:`prefer_source`
loads the source instead and says so once on stderr — a stale build must not run code
that is no longer in the file. ``SHOEWARDEN_PURE=1`` asks for the sources whatever is
built (the equality tests, a profile of the Python).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

COMPILED = ("controller.screening.reference", "controller.screening.packets",
            "controller.screening.screen", "controller.rounds", "controller.games.baccarat",
            "controller.games.blackjack", "controller.games.stud",
            "controller.audit.replay")
"""The modules ``setup.py`` compiles, each after the compiled modules it imports."""

ROOT = Path(__file__).resolve().parent.parent
BUILD_RECORD = ROOT / "controller" / "native.json"
"""What the last build compiled: ``{module: sha256 of its source}`` (written by setup.py)."""

PURE_ENV = "SHOEWARDEN_PURE"

#: per module of :data:`COMPILED` imported so far: "compiled", or why the source runs
STATUS: dict[str, str] = {}


def source_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def built_file(module: str) -> Path | None:
    """The compiled module beside the source, if one was built for this Python."""
    src = source_path(module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = src.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def why_source(module: str, record: dict[str, str] | None = None) -> str | None:
    """Why the source of ``module`` must run rather than its compiled module (None: the
    compiled module is built from the source as it is now)."""
    if os.environ.get(PURE_ENV):
        return f"{PURE_ENV} is set"
    if built_file(module) is None:
        return "not compiled (make native: needs gcc and the Python headers)"
    if record is None:
        record = read_record()
    built = record.get(module)
    if built is None:
        return f"its compiled module is not in {BUILD_RECORD.name} (built by hand?)"
    if built != source_digest(module):
        return "its source changed after it was compiled (make native)"
    return None


def read_record() -> dict[str, str]:
    try:
        data = json.loads(BUILD_RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) \
        else {}


def prefer_source(package: str) -> None:
    """Before ``package`` imports its compiled modules: load the source of each one that
    must not run compiled (:func:`why_source`), so that every later import finds it. The
    package's ``__init__`` calls this first."""
    record = read_record()
    for module in COMPILED:
        if module.rpartition(".")[0] != package or module in sys.modules:
            continue
        why = why_source(module, record)
        if why is None:
            STATUS[module] = "compiled"
            continue
        STATUS[module] = f"source: {why}"
        if built_file(module) is None:
            continue  # (the plain import finds the source)
        if not os.environ.get(PURE_ENV):
            print(f"shoewarden: {module}: running its source, not its compiled module: "
                  f"{why}", file=sys.stderr)
        _load_source(module)


def _load_source(module: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module, source_path(module))
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[module]
        raise
    parent, _, name = module.rpartition(".")
    setattr(sys.modules[parent], name, loaded)
    return loaded


def is_compiled(module: ModuleType) -> bool:
    """Does ``module`` run as compiled code (its file is an extension module)?"""
    return str(getattr(module, "__file__", "")).endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES))


def summary() -> str:
    """One line for a benchmark's or a report's header: which modules run compiled."""
    for module in COMPILED:
        __import__(module)
    return "; ".join(f"{m.rsplit('.', 1)[1]}: {STATUS.get(m, '?')}" for m in COMPILED)
