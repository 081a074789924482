"""The canonical encoding of an audit record and its SHA-256 chain hash.

A record is a JSON object built only from objects (string keys), arrays,
strings, integers, booleans and null — never floats, so that every language
encodes it to the same bytes. Its canonical encoding is::

    json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

and its ``hash`` is the lowercase hex SHA-256 of the canonical encoding of the
record *without* its ``hash`` key. The line in the log file is the canonical
encoding of the full record (``hash`` included) followed by ``\\n``.
See docs/audit-log.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

GENESIS = "0" * 64
"""The ``prev`` of the first record of a log: 64 zeros."""

RESERVED_KEYS = frozenset({"seq", "ts", "prev", "hash", "mac", "chain"})
"""Keys the writer sets; a caller never supplies them (``mac``, ``chain``: where they apply)."""

MAC_ALG = "HMAC-SHA-256"
"""The MAC of a keyed log (docs/audit-log.md, "Keyed logs")."""

_KEY_ID_MESSAGE = b"shoewarden audit key id"


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)  # one shared encoder: json.dumps() with arguments builds a new one per call


def canonical_text(record: Mapping[str, Any]) -> str:
    """The canonical encoding as text (what :func:`canonical_bytes` encodes to UTF-8)."""
    return _ENCODER.encode(record)


def canonical_bytes(record: Mapping[str, Any]) -> bytes:
    """Canonical UTF-8 encoding of ``record``: sorted keys, no whitespace, no ASCII escaping.

    The same bytes as ``json.dumps(record, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False).encode("utf-8")`` (NaN and infinities are refused).
    """
    return _ENCODER.encode(record).encode("utf-8")


def record_hash(record_without_hash: Mapping[str, Any]) -> str:
    """Lowercase hex SHA-256 of the canonical encoding of a record that has no ``hash`` key."""
    if "hash" in record_without_hash:
        raise ValueError("record_hash() takes the record without its 'hash' key")
    return hashlib.sha256(canonical_bytes(record_without_hash)).hexdigest()


def record_mac(key: bytes, prev_mac: str, record: Mapping[str, Any]) -> str:
    """The ``mac`` of a record in a keyed log.

    Lowercase hex HMAC-SHA-256 under ``key`` of the previous record's ``mac``
    (64 ASCII hex characters; ``GENESIS`` at the start of a MAC chain)
    followed by the canonical encoding of the record without ``hash`` and ``mac``.
    """
    body = {k: v for k, v in record.items() if k not in ("hash", "mac")}
    message = prev_mac.encode("ascii") + canonical_bytes(body)
    return hmac.digest(key, message, "sha256").hex()


def key_id(key: bytes) -> str:
    """A public name for a key: 16 hex digits of HMAC-SHA-256(key, "shoewarden audit key id").

    It tells which key a log was written with without revealing the key.
    """
    return hmac.new(key, _KEY_ID_MESSAGE, hashlib.sha256).hexdigest()[:16]


def seal(record: Mapping[str, Any], prev: str) -> dict[str, Any]:
    """A copy of ``record`` with ``prev`` set and ``hash`` computed over everything else.

    ``record`` must already carry ``seq`` and ``ts``; any ``hash`` it has is replaced.
    """
    sealed = {k: v for k, v in record.items() if k != "hash"}
    sealed["prev"] = prev
    sealed["hash"] = record_hash(sealed)
    return sealed


def check_json_value(value: Any, path: str = "record") -> None:
    """Raise ``TypeError`` naming the offending path if ``value`` is not float-free plain JSON.

    Allowed: dict with str keys, list, tuple (written as an array), str, int, bool, None.
    Floats are rejected: their text form differs between languages, so a record
    holding one would not have a language-independent canonical encoding.
    """
    _check(value, path, set())


def _check(value: Any, path: str, active: set[int]) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        raise TypeError(
            f"{path}: float {value!r} is not allowed in an audit record "
            "(records never contain floats; use an int in a stated unit or a string)"
        )
    if isinstance(value, (dict, list, tuple)):
        if id(value) in active:
            raise ValueError(f"{path}: circular reference")
        active.add(id(value))
        try:
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise TypeError(
                            f"{path}: key {key!r} is a {type(key).__name__}; "
                            "audit record keys must be strings"
                        )
                    _check(item, f"{path}.{key}", active)
            else:
                for i, item in enumerate(value):
                    _check(item, f"{path}[{i}]", active)
        finally:
            active.discard(id(value))
        return
    raise TypeError(
        f"{path}: {type(value).__name__} is not allowed in an audit record "
        "(only dict, list, str, int, bool and None)"
    )
