"""The floor's command-line options, apart so that building the CLI loads no web stack."""

from __future__ import annotations

import argparse

DISCLOSURES = ("live", "round", "shoe")  # floor.views.Disclosure


def add_floor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logs", action="append", required=True, metavar="DIR",
                   help="a directory of table logs as bench/run write them "
                   "(DIR/<table>/<table>-<date>.jsonl); repeat for more")
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
