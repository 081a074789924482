"""``shoewarden floor --logs DIR [--logs DIR …] --http HOST:PORT --log DIR [--db URL]``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from controller.audit import AuditLogError
from controller.audit.witness import WitnessError, load_or_create_key, parse_checkpoints
from floor.core import Floor
from floor.options import add_floor_options as add_floor_options
from floor.serve import HostPortError, host_port, listen, server
from floor.store import StoreError, open_store, sqlite_path
from floor.views import Disclosure
from floor.web import floor_app


def open_floor(args: argparse.Namespace) -> Floor:
    log_dir = Path(args.log)
    db = args.db or f"sqlite:///{(log_dir / 'floor.sqlite').resolve()}"
    witness = None
    if args.witness_key:
        witness, made = load_or_create_key(args.witness_key)
        if made:
            print(f"shoewarden floor: made the witness key {args.witness_key} (key "
                  f"{witness.key}); its public key: shoewarden floor witness-key "
                  f"{args.witness_key} --public PUB", flush=True)
    store = open_store(db)
    return Floor([Path(d) for d in args.logs or []], store, audit_dir=log_dir,
                 silent_after=args.silent_after, files_on_disk=not args.nats,
                 witness=witness)


def cmd_witness_key(args: argparse.Namespace) -> int:
    """``shoewarden floor witness-key FILE [--public PUB]``."""
    if args.public and (why := _public_problem(Path(args.key), Path(args.public))):
        print(f"shoewarden floor witness-key: --public {args.public}: {why}", file=sys.stderr)
        return 2
    try:
        signer, made = load_or_create_key(args.key)
        pem = signer.public_pem()
        if args.public:
            Path(args.public).write_bytes(pem)
    except WitnessError as exc:
        print(f"shoewarden floor witness-key: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"shoewarden floor witness-key: {args.public}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    said = "made" if made else "read"
    print(f"shoewarden floor witness-key: {said} {args.key} (key {signer.key})"
          + (f"; public key written to {args.public}" if args.public else ""),
          file=sys.stderr if not args.public else sys.stdout)
    if not args.public:
        sys.stdout.write(pem.decode("ascii"))
    return 0


def _public_problem(key: Path, public: Path) -> str | None:
    """Why the public key must not be written at ``public``: over the private key (a
    review's ``witness-key wk.pem --public wk.pem`` lost the floor's signing key), or
    over any file that holds a private key."""
    try:
        if public.exists() and ((key.exists() and os.path.samefile(key, public))
                                or b"PRIVATE KEY" in public.read_bytes()[:4096]):
            return "it holds the private key: writing the public key there would lose it"
        if not public.exists() and os.path.abspath(public) == os.path.abspath(key):
            return "it is the key file itself"
    except OSError as exc:
        return f"cannot use it: {exc.strerror or exc}"
    return None


def _existing_index(db: str) -> str | None:
    """Why ``--db`` names no floor index a command only reads: an SQLite file that is not
    there (opening it made an empty one — and its directories — and the command then said
    nothing, or that the floor holds nothing: a review)."""
    if db.startswith(("postgresql://", "postgres://")):
        return None
    try:
        path = sqlite_path(db)
    except StoreError as exc:
        return str(exc)
    if path != ":memory:" and not Path(path).is_file():
        return f"no floor index at {path} (--db names the floor's index: sqlite:///PATH)"
    return None


def _out_problem(out: Path) -> str | None:
    """Why the checkpoints must not be written at ``out``: a file that holds something else
    than checkpoints (an audit log, a key, a database) would be truncated."""
    try:
        if out.is_dir():
            return "a directory"
        if not out.exists() or out.stat().st_size == 0:
            return None
        head = out.read_bytes()[:1 << 16]
        try:
            parse_checkpoints(head[:head.rfind(b"\n") + 1] or head, str(out))
        except WitnessError:
            return ("it holds something else than witness checkpoints: give a new file "
                    "(nothing was written)")
    except OSError as exc:
        return f"cannot use it: {exc.strerror or exc}"
    return None


def cmd_witness_export(args: argparse.Namespace) -> int:
    """``shoewarden floor witness-export --db URL [--table T] [--out FILE]``."""
    why = _existing_index(args.db) or (_out_problem(Path(args.out)) if args.out else None)
    if why is not None:
        print(f"shoewarden floor witness-export: {why}" if why.startswith("no floor") or
              why.startswith("--db") else
              f"shoewarden floor witness-export: --out {args.out}: {why}", file=sys.stderr)
        return 2
    try:
        store = open_store(args.db)
    except StoreError as exc:
        print(f"shoewarden floor witness-export: {exc}", file=sys.stderr)
        return 2
    try:
        data = b"".join(cp.to_line() for cp in store.checkpoints(args.table))
    finally:
        store.close()
    if args.out:
        try:
            Path(args.out).write_bytes(data)
        except OSError as exc:
            print(f"shoewarden floor witness-export: {args.out}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 2
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    """``shoewarden floor repair --db URL --logs DIR --log DIR --table T --file F --by NAME
    --note TEXT`` (floor.repair)."""
    from floor.repair import RepairError, log_path, repair_file

    store, floor = None, None
    try:
        source = log_path([Path(d) for d in args.logs], args.table, args.file)
        log_dir = Path(args.log)
        index = (log_dir / "floor.sqlite").resolve()
        if not args.db and not index.is_file():  # (a new, empty index would hold nothing)
            raise RepairError(f"no floor index at {index} (the default, under --log): give "
                              "--db URL, the floor's index", refused=False)
        if args.db and (why := _existing_index(args.db)) is not None:
            raise RepairError(why, refused=False)
        store = open_store(args.db or f"sqlite:///{index}")
        floor = Floor([], store, audit_dir=log_dir, files_on_disk=False,
                      tables=frozenset({args.table}))
        done = repair_file(floor, args.table, args.file, source, by=args.by, note=args.note)
    except RepairError as exc:
        print(f"shoewarden floor repair: {exc}", file=sys.stderr)
        return 1 if exc.refused else 2
    except (StoreError, AuditLogError, OSError, ValueError) as exc:
        print(f"shoewarden floor repair: {exc}", file=sys.stderr)
        return 2
    finally:
        if floor is not None:
            floor.stop()  # (closes the floor's log)
        if store is not None:
            store.close()
    print(f"shoewarden floor repair: table {done.table}: {done.file} repaired from "
          f"{done.source}: {done.records} record(s), seq {done.from_seq + 1} to {done.to_seq} "
          f"(head {done.to_hash[:12]}…), committed; the break is cleared; recorded by "
          f"{args.by.strip()} in the floor's log {args.log} (seq {done.log_seq})")
    return 0


def cmd_floor(args: argparse.Namespace) -> int:
    try:
        host, port = host_port(args.http)
        if bool(args.logs) == bool(args.nats):
            raise StoreError("give --logs DIR (log files) or --nats URL (the stream), one "
                             "of the two")
        for d in args.logs or []:
            if not Path(d).is_dir():
                raise StoreError(f"--logs {d}: no such directory")
        log = Path(args.log)
        there = next((p for p in (log, *log.parents) if p.exists()), None)
        if there is not None and not there.is_dir():  # (a file, or a path under one)
            raise StoreError(f"--log {args.log}: {'' if there == log else f'{there} is '}"
                             "not a directory (the floor's own log is a directory)")
        consumer_connection = None
        if args.nats:
            from floor.forward import Connection, check_servers

            consumer_connection = Connection(check_servers(args.nats), creds=args.nats_creds,
                                             tls_ca=args.nats_ca)
        listener = listen(host, port, f"--http {args.http}")
        try:
            floor = open_floor(args)
        except BaseException:
            listener.close()
            raise
    except (HostPortError, StoreError, AuditLogError, WitnessError, OSError,
            ValueError) as exc:
        print(f"shoewarden floor: {exc}", file=sys.stderr)
        return 2
    consumer = None
    if consumer_connection is not None:
        from floor.consume import NatsConsumer

        consumer = NatsConsumer(floor, consumer_connection)
        consumer.start()
    app = floor_app(floor, disclosure=Disclosure(args.disclosure))
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    bound = listener.getsockname()[1]  # (the port the OS chose for port 0)
    print(f"shoewarden floor: following {', '.join(args.logs or args.nats)}; "
          f"http://{shown}:{bound}/ (log {args.log})", flush=True)
    server(app, host, port).run(sockets=[listener])
    if consumer is not None:
        consumer.stop()
    floor.store.close()
    return 0


def cmd_forward(args: argparse.Namespace) -> int:
    """``shoewarden forward --logs DIR --publish URL [--follow]``."""
    from controller.audit.files import check_table_id, table_files
    from floor.forward import Forwarder, ForwardError, connection_from

    try:
        if getattr(args, "witness_from", None) or getattr(args, "witness_public", None):
            raise ForwardError("--witness-from and --witness-public are run's and bench's: "
                               "the table records the floor's checkpoints in its own log; "
                               "forward only publishes logs")
        connection = connection_from(args)
        for d in args.logs:
            if not Path(d).is_dir():
                raise ForwardError(f"--logs {d}: no such directory")
        for table in getattr(args, "table", None) or ():
            try:
                check_table_id(table)
            except ValueError as exc:
                raise ForwardError(f"--table: {exc}") from None
            if not (args.follow or getattr(args, "until_eof", False)) and not any(
                    table_files(d, table) for d in args.logs):
                raise ForwardError(f"--table {table}: no log of it under "
                                   f"{', '.join(args.logs)} (DIR/{table}/{table}-DATE.jsonl)")
    except ForwardError as exc:
        print(f"shoewarden forward: {exc}", file=sys.stderr)
        return 2
    until_eof = getattr(args, "until_eof", False)
    fwd = Forwarder([Path(d) for d in args.logs], connection,
                    tables=frozenset(args.table) if getattr(args, "table", None) else None,
                    stop_when_done=not (args.follow or until_eof))
    if until_eof:  # the child of a table's run/bench --publish (floor.forward_process)
        import json

        from floor.forward_process import follow_until_eof

        status = follow_until_eof(fwd, args.finish_timeout)
        with contextlib.suppress(OSError, ValueError):  # the table may be gone
            print(json.dumps(status), flush=True)
        return 0 if fwd.error is None else 1
    fwd.start()
    try:
        fwd.join()
    except KeyboardInterrupt:
        fwd.stop()
    if fwd.error is not None:
        print(f"shoewarden forward: {fwd.error}", file=sys.stderr)
        return 1
    for why in fwd.damaged.values():
        print(f"shoewarden forward: {why}", file=sys.stderr)
    print(f"shoewarden forward: {fwd.published} record(s) published, {fwd.duplicates} "
          f"already in the stream, tables {', '.join(sorted(fwd.cursors)) or 'none'}"
          + (f"; {fwd.held} held back until their shoe ends (--disclosure shoe)"
             if fwd.held else ""))
    return 1 if fwd.damaged else 0
