"""Witness checkpoints: a table's chain head at a round end, signed by the floor (Ed25519).

An anchor (:mod:`controller.audit.anchors`) is written by the table's own machine; whoever
controls that machine controls the anchor file too. A witness checkpoint is signed by
another party — the floor, with a key the table never holds — at the moment the floor
received the round's last record: ``table``, ``file``, ``seq``, ``hash`` of the round's
``note`` output and ``ts``, the floor's clock when it signed. ``audit verify --witness``
checks every checkpoint's signature under the floor's public key and then that its
(file, seq, hash) is in the log, so a tail cut or a rewrite after the floor saw the round
is caught by a party the table's machine does not control (docs/audit-log.md, the trust
model).

A checkpoint line (JSON Lines, one canonical object a line)::

    {"file":"BJ-01-2026-11-21.jsonl","hash":"…","key":"3f9c…","seq":812,
     "sig":"<base64 Ed25519 signature>","table":"BJ-01","ts":"2026-11-21T11:02:13.120Z"}

The signature covers ``shoewarden-witness/1\\n`` followed by the canonical bytes of
``{file, hash, seq, table, ts}``; ``key`` (the first 16 hex digits of SHA-256 of the raw
public key) only says which key signed, so a verifier given the wrong key says so.
Key files are PEM (PKCS#8 private, SubjectPublicKeyInfo public), from ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import http.client
import os
import stat
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import jsontext
from controller.audit.anchors import Anchor
from controller.audit.canonical import canonical_bytes
from controller.inputfiles import file_problem
from controller.jsontext import JsonTextError

DOMAIN = b"shoewarden-witness/1\n"
#: the ``reason`` a checkpoint carries when it is checked as an anchor
WITNESS_REASON = "witness"


class WitnessError(ValueError):
    """A witness key or checkpoint file that cannot be used (a clear message, exit 2)."""


@dataclass(frozen=True)
class Checkpoint:
    """One signed head of a table's chain."""

    table: str
    file: str
    seq: int
    hash: str
    ts: str
    key: str = ""
    sig: str = ""
    line: int = 0  # where it was read (a file's line, or the place in a download)

    def signed_bytes(self) -> bytes:
        return DOMAIN + canonical_bytes({"table": self.table, "file": self.file,
                                         "seq": self.seq, "hash": self.hash, "ts": self.ts})

    def to_record(self) -> dict[str, Any]:
        return {"table": self.table, "file": self.file, "seq": self.seq, "hash": self.hash,
                "ts": self.ts, "key": self.key, "sig": self.sig}

    def to_line(self) -> bytes:
        return canonical_bytes(self.to_record()) + b"\n"

    def as_anchor(self) -> Anchor:
        return Anchor(self.table, self.file, self.seq, self.hash, self.ts, WITNESS_REASON,
                      self.line, kind="checkpoint")


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


# ---------------------------------------------------------------------- keys


class WitnessSigner:
    """The floor's private key: signs checkpoints."""

    def __init__(self, private: Any) -> None:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        self._private = private
        raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key = key_id(raw)

    def sign(self, table: str, file: str, seq: int, hash: str, ts: str) -> Checkpoint:
        unsigned = Checkpoint(table, file, seq, hash, ts, self.key)
        sig = self._private.sign(unsigned.signed_bytes())
        return Checkpoint(table, file, seq, hash, ts, self.key,
                          base64.b64encode(sig).decode("ascii"))

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        return bytes(self._private.public_key().public_bytes(
            Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))


MAX_FILE = 64 << 20
"""Largest key or checkpoint file read (a floor's checkpoints for years of one table's days
are a few MB)."""


def _read_file(name: str) -> bytes:
    """A regular file's bytes. A FIFO or a device named by mistake would block the command
    forever (a review), a huge file fill memory: both refused with an ``OSError``."""
    why = file_problem(name)  # (before opening: opening a FIFO blocks)
    if why is not None:
        raise (FileNotFoundError if why == "no such file" else OSError)(0, why)
    with open(name, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise OSError(0, f"larger than {MAX_FILE >> 20} MB")
    return data


def create_key(path: str | os.PathLike[str]) -> WitnessSigner:
    """A new Ed25519 key in ``path`` (PEM, mode 0600, never over an existing file)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    name = os.fspath(path)
    try:
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise WitnessError(f"{name}: a key file is already there (not overwritten)") from None
    except OSError as exc:
        raise WitnessError(f"{name}: cannot create the witness key: "
                           f"{exc.strerror or exc}") from None
    try:
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    return WitnessSigner(private)


def load_key(path: str | os.PathLike[str]) -> WitnessSigner:
    """The floor's private key from ``path``; refused if others may read it."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    name = os.fspath(path)
    try:
        mode = os.stat(name).st_mode
        data = _read_file(name)
    except FileNotFoundError:
        raise WitnessError(f"{name}: no such witness key file") from None
    except OSError as exc:
        raise WitnessError(f"{name}: cannot read the witness key: {exc.strerror or exc}") \
            from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise WitnessError(f"{name}: the witness key is readable by others (mode "
                           f"{stat.S_IMODE(mode):04o}); chmod 600 it")
    try:
        private = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise WitnessError(f"{name}: not a PEM private key ({exc})") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise WitnessError(f"{name}: not an Ed25519 key")
    return WitnessSigner(private)


def load_or_create_key(path: str | os.PathLike[str]) -> tuple[WitnessSigner, bool]:
    """``--witness-key FILE``: the key there, or a new one made there (first use)."""
    if os.path.exists(path):
        return load_key(path), False
    return create_key(path), True


def load_public_key(path: str | os.PathLike[str]) -> Any:
    """``--witness-key PUB`` of ``audit verify``: the floor's public key (PEM)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    name = os.fspath(path)
    try:
        data = _read_file(name)
    except OSError as exc:
        raise WitnessError(f"{name}: cannot read the public key: {exc.strerror or exc}") \
            from None
    try:
        public = load_pem_public_key(data)
    except (ValueError, TypeError):
        raise WitnessError(f"{name}: not a PEM public key (export it with "
                           "`shoewarden floor witness-key FILE --public PUB`)") from None
    if not isinstance(public, Ed25519PublicKey):
        raise WitnessError(f"{name}: not an Ed25519 public key")
    return public


# ---------------------------------------------------------------------- checkpoints


def parse_checkpoints(data: bytes, source: str) -> list[Checkpoint]:
    """Every checkpoint of a JSON Lines text; :class:`WitnessError` naming the line."""
    out = []
    for n, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = jsontext.loads(line)
        except JsonTextError as exc:
            raise WitnessError(f"{source}: line {n}: not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise WitnessError(f"{source}: line {n}: not a JSON object")
        fields = {k: obj.get(k) for k in ("table", "file", "hash", "ts", "key", "sig")}
        seq = obj.get("seq")
        if type(seq) is not int or seq < 1 or not all(isinstance(v, str)
                                                      for v in fields.values()):
            raise WitnessError(f"{source}: line {n}: a checkpoint needs table, file, hash, ts, "
                               "key, sig (strings) and seq (an integer ≥ 1)")
        out.append(Checkpoint(seq=seq, line=n, **fields))  # type: ignore[arg-type]
    return out


def read_checkpoints(where: str, *, timeout: float = 30) -> list[Checkpoint]:
    """``--witness FILE|URL``: a checkpoint file, or the floor's ``/api/witness/{table}``."""
    if where.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(where, timeout=timeout) as resp:
                data = resp.read()
        except urllib.error.HTTPError as exc:
            raise WitnessError(f"{where}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WitnessError(f"{where}: cannot fetch the checkpoints: {reason}") from None
        except (ValueError, http.client.InvalidURL) as exc:  # a malformed URL: a port
            # "abc", a space in the host (InvalidURL), "http://[::1" (ValueError)
            raise WitnessError(f"{where}: not a valid URL: {exc}") from None
        except http.client.HTTPException as exc:  # a server that answers no HTTP, or cuts
            # its answer short (BadStatusLine, IncompleteRead: a review)
            raise WitnessError(f"{where}: cannot fetch the checkpoints: the server's answer "
                               f"is not whole HTTP ({type(exc).__name__})") from None
        return parse_checkpoints(data, where)
    try:
        data = _read_file(where)
    except OSError as exc:
        raise WitnessError(f"{where}: cannot read the checkpoint file: "
                           f"{exc.strerror or exc}") from None
    return parse_checkpoints(data, where)


def check_signatures(checkpoints: Iterable[Checkpoint], public: Any
                     ) -> tuple[list[Checkpoint], list[str]]:
    """The checkpoints signed under ``public``, and a sentence for every other one."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    mine = key_id(public.public_bytes(Encoding.Raw, PublicFormat.Raw))
    good, bad = [], []
    for cp in checkpoints:
        try:
            public.verify(base64.b64decode(cp.sig, validate=True), cp.signed_bytes())
        except (InvalidSignature, binascii.Error, ValueError):
            other = f"; it names key {cp.key}, the key given is {mine}" if cp.key != mine else ""
            bad.append(f"checkpoint line {cp.line} ({cp.table} {cp.file} seq {cp.seq}, signed "
                       f"{cp.ts}): the signature is not valid under the witness key{other}")
        else:
            good.append(cp)
    return good, bad
