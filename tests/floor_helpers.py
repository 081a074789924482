"""Helpers for the floor's tests: table logs written by the real session, grown in pieces."""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Callable
from pathlib import Path

from controller.cli import main as cli_main
from floor.core import Floor
from floor.store import FloorStore, SqlIndex

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "config" / "examples"
DAY = "2026-11-21"


def table_log(root: Path, table: str = "BP-01", profile: str = "gr-banco-punto",
              stream: str = "gr-banco-punto-mistakes.jsonl") -> Path:
    """A day's log of ``table`` under ``root``, written by ``shoewarden check --log``: the
    engine's real records (a Banco Punto day with three deviations, by default)."""
    path = root / table / f"{table}-{DAY}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()):
        cli_main(["check", "--profile", profile, "--log", str(path), str(EXAMPLES / stream)])
    return path


def grow(source: bytes, target: Path, cuts: list[int]) -> list[bytes]:
    """``source`` split at byte offsets ``cuts`` (mid-line on purpose): the pieces a table
    appends one after another."""
    target.parent.mkdir(parents=True, exist_ok=True)
    bounds = [0, *sorted(cuts), len(source)]
    return [source[a:b] for a, b in itertools.pairwise(bounds)]


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def sqlite_store(work: Path) -> SqlIndex:
    return FloorStore(str(work / "floor.sqlite"))


#: the index a floor working in ``work`` opens (the same ``work``, the same index: a
#: restart); a test module swaps it to run the same tests on another backend
STORE_FOR: list[Callable[[Path], SqlIndex]] = [sqlite_store]


def open_floor(roots: list[Path], work: Path, **kw: object) -> Floor:
    return Floor(roots, STORE_FOR[0](work), audit_dir=work / "floorlog",
                 **kw)  # type: ignore[arg-type]


def drain(floor: Floor) -> int:
    total = floor.poll(rescan=True)  # the files written since the last listing, at once
    while True:
        n = floor.poll()
        total += n
        if n == 0:
            return total


def deviations_in(path: Path) -> list[tuple[int, str, str]]:
    """(seq, code, severity) of every deviation record in a log."""
    import orjson

    out = []
    for line in path.read_bytes().splitlines():
        r = orjson.loads(line)
        o = r.get("output") or {}
        if r.get("kind") == "output" and o.get("type") == "deviation":
            out.append((r["seq"], o["code"], o["severity"]))
    return out
