"""What the audit log's card path costs at least, beside ``check`` (``make bench``; issue 9;
docs/architecture.md, "The log's own floor").

``check --log --durability none`` is held against ``check`` without a log (target ≤ 1.6×,
``benchmarks/paths.py``). This prints what bounds that ratio, on the same stream (Banco
Punto days), in CPU time, best of ``--repeat``:

1. ``check`` without a log, per event;
2. the writer's card-path calls alone (``AuditLog.input_event`` and ``outputs``), the
   events and outputs of a recorded run written again, per event;
3. a stripped loop that does only what every record of this format needs — the event's
   canonical encoding (orjson, as the writer), one template filled per record, its
   SHA-256, the line laid out around it — with no lock, durability policy, context check
   or error path. Its log verifies (``audit verify``), so it is the whole job.

``1 + (3) / (1)`` is a ratio no writer of this record format, in this interpreter, can
beat. No target of its own: the figures say what the 1.6× target asks. Usage:
``python benchmarks/log_floor.py [--events N] [--repeat N]``
"""

from __future__ import annotations

import argparse
import binascii
import hashlib
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
from paths import PROFILE, best, quiet_check, write_stream

from controller import jsontext
from controller.audit import AuditLog, HashChainWriter, verify_file
from controller.audit.timestamps import SystemStamp
from controller.events import parse_event
from controller.profiles import load_profile
from controller.session import TableSession

Step = tuple[Any, int, tuple[Any, ...], list[Any], tuple[Any, ...]]


def recorded(stream: Path) -> list[Step]:
    """Each event of the stream with its line, the engine's context before it, its outputs
    and the context after (what the card path is handed)."""
    session = TableSession(load_profile(PROFILE), None)
    engine = session.engine
    steps = []
    with open(stream, "rb") as f:
        for number, raw in enumerate(f, 1):
            event = parse_event(jsontext.loads(raw))
            before = engine.context_key()
            outputs = session.feed(event, line=number)
            steps.append((event, number, before, outputs, engine.context_key()))
    return steps


def writer_calls(steps: list[Step], path: Path) -> None:
    path.unlink(missing_ok=True)
    log = AuditLog.open(path, durability="none")
    for event, line, before, outputs, after in steps:
        log.input_event(event, line=line, context=before)
        log.outputs(outputs, context=after)
    log.close()


def stripped(steps: list[Step], path: Path) -> None:
    """The card path's records, sealed and laid out with nothing else (see the module)."""
    dumps, sort, sha256, hexlify = orjson.dumps, orjson.OPT_SORT_KEYS, hashlib.sha256, \
        binascii.hexlify
    stamp = SystemStamp()
    # the writer's own templates (an input with its line [1], an output [2]), made once a
    # context, as it makes them
    frames_for = HashChainWriter.to_stream(io.StringIO())._frames_for
    frames: dict[tuple[Any, ...], tuple[bytes, bytes, bytes]] = {}
    kept: dict[int, tuple[Any, bytes]] = {}
    lines: list[bytes] = []
    prev, seq = b"0" * 64, 0
    for event, line, before, outputs, after in steps:
        ts = stamp().encode()
        frame = frames.get(before) or frames.setdefault(before, frames_for(before))
        payload = dumps(event.to_record(), option=sort)
        seq += 1
        hashed = frame[1] % (payload, line, prev, seq, ts)
        prev = hexlify(sha256(hashed).digest())
        cut = len(payload) + 9
        lines.append(b"".join((hashed[:cut], b',"hash":"', prev, b'"', hashed[cut:], b"\n")))
        if outputs:
            template = (frames.get(after) or frames.setdefault(after, frames_for(after)))[2]
            for output in outputs:
                entry = kept.get(id(output))
                if entry is None or entry[0] is not output:
                    entry = kept[id(output)] = (output, dumps(output.to_record(), option=sort))
                seq += 1
                hashed = template % (entry[1], prev, seq, ts)
                prev = hexlify(sha256(hashed).digest())
                lines.append(b"".join((b'{"hash":"', prev, b'",', hashed[1:], b"\n")))
    path.write_bytes(b"".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=140_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="shoewarden-log-floor-") as tmp:
        stream, log = Path(tmp) / "stream.jsonl", Path(tmp) / "log.jsonl"
        events = write_stream(stream, args.events)
        steps = recorded(stream)
        print(f"log floor: {events:,} events of {PROFILE} days; best of {args.repeat}")
        check = best(args.repeat, lambda: quiet_check(str(stream)))
        calls = best(args.repeat, lambda: writer_calls(steps, log))
        bare = best(args.repeat, lambda: stripped(steps, log))
        result = verify_file(log)
        if not result.ok or result.records != len(Path(log).read_bytes().splitlines()):
            print(f"log floor: the stripped loop's log does not verify: {result.reason}")
            return 1
        us = 1e6 / events
        print(f"  check, no log                      {check * us:5.2f} µs an event")
        print(f"  the writer's card-path calls       {calls * us:5.2f} µs an event  "
              f"(check --log at best {1 + calls / check:.2f}×)")
        print(f"  the stripped loop (this format)    {bare * us:5.2f} µs an event  "
              f"(no writer of this format below {1 + bare / check:.2f}×; target 1.6×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
