"""The floor's command-line options, apart so that building the CLI loads no web stack."""

from __future__ import annotations

import argparse

DISCLOSURES = ("live", "round", "shoe")  # floor.views.Disclosure


def add_floor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logs", action="append", metavar="DIR",
                   help="a directory of table logs as bench/run write them "
                   "(DIR/<table>/<table>-<date>.jsonl); repeat for more")
    p.add_argument("--nats", action="append", metavar="URL",
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
    p.add_argument("--silent-after", type=float, default=120.0, metavar="SECONDS",
                   help="an open table silent this long is an alert (default 120)")


def add_publish_options(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--publish`` and the NATS connection's files (run, bench, forward)."""
    p.add_argument("--publish", action="append", required=required, metavar="URL",
                   help="publish every record of the table's log to NATS JetStream (stream "
                   "SHOEWARDEN): nats://HOST:PORT or tls://HOST:PORT; repeat (or separate "
                   "with commas) for a cluster")
    p.add_argument("--nats-creds", metavar="FILE", help="NATS credentials file (JWT + nkey)")
    p.add_argument("--nats-ca", metavar="FILE", help="CA file to verify the NATS servers' TLS")
