"""The floor's command-line options, apart so that building the CLI loads no web stack."""

from __future__ import annotations

import argparse
import math
from typing import Any
from urllib.parse import urlsplit

NATS_SCHEMES = ("nats", "tls")  # (nats-py also speaks ws://; the forwarder takes these two)


def nats_urls(text: str) -> str:
    """``--publish`` / ``--nats`` / ``--witness-from``: one URL or several separated by
    commas, each ``nats://HOST:PORT`` or ``tls://HOST:PORT``. A malformed one (a port "abc", no
    host, "nats://[::1") made ``forward`` retry it forever without a word, and ``bench`` say
    OK having published nothing (a review): refused here, naming it."""
    for url in (u.strip() for u in text.split(",")):
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{url!r}: {e}") from None
        if parts.scheme not in NATS_SCHEMES:
            raise argparse.ArgumentTypeError(
                f"{url!r}: expected nats://HOST:PORT (or tls://HOST:PORT)")
        if not parts.hostname:
            raise argparse.ArgumentTypeError(f"{url!r}: no host")
        if port == 0:
            raise argparse.ArgumentTypeError(f"{url!r}: port 0")
    return text


def seconds(text: str) -> float:
    """A number of seconds as typed (every command's seconds options start here)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None


def positive_seconds(text: str) -> float:
    """Seconds, more than 0 and finite (``--silent-after -1`` or ``nan`` was taken)."""
    value = seconds(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected seconds more than 0, got {text}")
    return value


DISCLOSURES = ("live", "round", "shoe")  # floor.views.Disclosure
PUBLISH_DISCLOSURES = ("live", "shoe")  # floor.forward.PUBLISH_DISCLOSURES


def add_floor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logs", action="append", metavar="DIR",
                   help="a directory of table logs as bench/run write them "
                   "(DIR/<table>/<table>-<date>.jsonl); repeat for more")
    p.add_argument("--nats", action="append", metavar="URL", type=nats_urls,
                   help="consume the tables' records from NATS JetStream instead (stream "
                   "SHOEWARDEN, durable consumer shoewarden-floor): nats://HOST:PORT; repeat "
                   "for a cluster; with --db postgresql://…")
    p.add_argument("--nats-creds", metavar="FILE", help="NATS credentials file (JWT + nkey)")
    p.add_argument("--nats-ca", metavar="FILE", help="CA file to verify the NATS servers' TLS")
    p.add_argument("--http", default="127.0.0.1:8080", metavar="HOST:PORT",
                   help="where to serve the pages and the API (default 127.0.0.1:8080)")
    p.add_argument("--log", required=True, metavar="DIR",
                   help="the floor's own audit log (acknowledgements), hash-chained")
    p.add_argument("--db", metavar="URL",
                   help="the floor's index (default sqlite:///<--log>/floor.sqlite)")
    p.add_argument("--disclosure", choices=DISCLOSURES, default="live",
                   help="when the floor shows cards: live, after the round (round), after "
                   "the shoe (shoe: no live count) (default live)")
    p.add_argument("--witness-key", metavar="FILE",
                   help="sign a checkpoint of each table's chain at every round end with this "
                   "Ed25519 key (PEM, mode 0600; made on first use), kept in --db, served at "
                   "/api/witness/TABLE and published on shoewarden.witness.TABLE")
    p.add_argument("--silent-after", type=positive_seconds, default=120.0, metavar="SECONDS",
                   help="an open table silent this long is an alert (default 120)")


def add_publish_options(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--publish`` and the NATS connection's files (run, bench, forward)."""
    p.add_argument("--publish", action="append", required=required, metavar="URL",
                   type=nats_urls,
                   help="publish every record of the table's log to NATS JetStream (stream "
                   "SHOEWARDEN): nats://HOST:PORT or tls://HOST:PORT; repeat (or separate "
                   "with commas) for a cluster")
    p.add_argument("--nats-creds", metavar="FILE", help="NATS credentials file (JWT + nkey)")
    p.add_argument("--nats-ca", metavar="FILE", help="CA file to verify the NATS servers' TLS")
    p.add_argument("--disclosure", choices=PUBLISH_DISCLOSURES, default="live",
                   help="what leaves the table: every record as written (live), or a shoe's "
                   "records only once the shoe ended (shoe: no card of a shoe reaches the "
                   "network before its end; the floor's alerts come at shoe end too) "
                   "(default live)")
    p.add_argument("--witness-from", action="append", metavar="URL", type=nats_urls,
                   help="record in the table's own log the latest checkpoint of its chain the "
                   "floor signed (shoewarden.witness.<table> on these NATS servers), as a "
                   "witness_checkpoint input: nats://HOST:PORT; repeat for a cluster")
    p.add_argument("--witness-public", metavar="PUB",
                   help="with --witness-from: the floor's public witness key (PEM, from "
                   "`shoewarden floor witness-key FILE --public PUB`); a checkpoint is recorded "
                   "only when its signature verifies under it, any other is refused with a "
                   "warning (without it every checkpoint received is recorded; audit verify "
                   "--witness-key checks them later)")


def add_witness_commands(sub: Any) -> None:
    """``shoewarden floor witness-key`` and ``floor witness-export`` (reached as
    ``floor-witness-key`` / ``floor-witness-export``, see controller.cli.main)."""
    key = sub.add_parser(
        "floor-witness-key", prog="shoewarden floor witness-key",
        help="make the floor's witness key (or read it) and print its public key",
        description="Make an Ed25519 witness key in FILE (mode 0600) if there is none, and "
        "print its public key (PEM): give that to whoever runs `audit verify --witness`.")
    key.add_argument("key", metavar="FILE", help="the floor's private key file")
    key.add_argument("--public", metavar="PUB", help="write the public key here, not stdout")
    export = sub.add_parser(
        "floor-witness-export", prog="shoewarden floor witness-export",
        help="the floor's signed checkpoints as JSON Lines (for audit verify --witness)",
        description="Every witness checkpoint the floor signed (or one table's), one JSON "
        "object a line, from its index.")
    export.add_argument("--db", required=True, metavar="URL",
                        help="the floor's index: sqlite:///PATH or postgresql://…")
    export.add_argument("--table", help="only this table")
    export.add_argument("--out", metavar="FILE", help="write here, not stdout")


def add_repair_command(sub: Any) -> None:
    """``shoewarden floor repair`` (reached as ``floor-repair``, see controller.cli.main)."""
    repair = sub.add_parser(
        "floor-repair", prog="shoewarden floor repair",
        help="take a broken file's true records in again from the table's own log",
        description="After a CHAIN_BREAK (a record forged into the stream under the table's "
        "message id, say) the floor takes nothing more of that file. Once the break is "
        "investigated, this takes the file's records in from the table's log: only a file "
        "marked broken, only when the log holds what the floor committed and continues its "
        "chain from there. Recorded, with who and why, in the floor's own log; the alert "
        "and its acknowledgement stay. Exit 0 repaired, 1 refused, 2 bad arguments "
        "(docs/floor.md).")
    repair.add_argument("--db", metavar="URL",
                        help="the floor's index (default sqlite:///<--log>/floor.sqlite)")
    repair.add_argument("--logs", action="append", required=True, metavar="DIR",
                        help="a directory of table logs (DIR/<table>/<file>): the table's own "
                        "log, copied from the table; repeat for more")
    repair.add_argument("--log", required=True, metavar="DIR",
                        help="the floor's own audit log, where the repair is recorded (not a "
                        "running floor's: it holds its log open)")
    repair.add_argument("--table", required=True, help="the table whose file is broken")
    repair.add_argument("--file", required=True, metavar="FILE",
                        help="the broken log file's name (TABLE-YYYY-MM-DD[.N].jsonl)")
    repair.add_argument("--by", required=True, metavar="NAME",
                        help="who repairs it (as an acknowledgement's name)")
    repair.add_argument("--note", required=True, metavar="TEXT",
                        help="why: what the investigation found")
