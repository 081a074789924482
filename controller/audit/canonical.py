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

import orjson

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


_SORTED = orjson.OPT_SORT_KEYS


def canonical_text(record: Mapping[str, Any]) -> str:
    """The canonical encoding as text (what :func:`canonical_bytes` encodes to UTF-8)."""
    return _ENCODER.encode(record)


def canonical_bytes(record: Mapping[str, Any]) -> bytes:
    """Canonical UTF-8 encoding of ``record``: sorted keys, no whitespace, no ASCII escaping.

    The same bytes as ``json.dumps(record, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False).encode("utf-8")`` (NaN and infinities are refused).
    """
    return _ENCODER.encode(record).encode("utf-8")


def plain_bytes(record: Mapping[str, Any]) -> bytes:
    """:func:`canonical_bytes` of a float-free record (one that :func:`check_json_value`
    accepts, or that was decoded without floats), about five times faster: orjson with
    sorted keys gives the same bytes as the stdlib for everything such a record holds
    (tests/test_audit_canonical.py compares them on generated records). What orjson
    cannot encode (an integer beyond 64 bits) goes to the stdlib encoder."""
    try:
        return orjson.dumps(record, option=_SORTED)
    except (orjson.JSONEncodeError, TypeError):
        return _ENCODER.encode(record).encode("utf-8")


def _inner(part: Mapping[str, Any]) -> bytes:
    """The members of ``part`` in canonical form, without the braces (b"" when empty)."""
    return plain_bytes(part)[1:-1] if part else b""


def _obj(*inner: bytes) -> bytes:
    return b"{" + b",".join([i for i in inner if i]) + b"}"


def seal_line(record: Mapping[str, Any], key: bytes | None = None,
              prev_mac: str = GENESIS) -> tuple[bytes, str, str | None]:
    """Seal a float-free record (``seq``, ``ts``, ``prev`` set; no ``hash``, no ``mac``) with one
    encoding of its members: ``(line, hash, mac)``, where ``line`` is the canonical
    encoding of the record with ``hash`` (and ``mac`` in a keyed log) and ends in
    ``\n`` — the same bytes as :func:`record_mac`, :func:`record_hash` and
    :func:`canonical_bytes` one after the other, which encode the record three times.

    The top-level keys sort around ``hash`` and ``mac``, so the members are encoded in
    three runs (before ``hash``, between, after ``mac``) and the hash and MAC members are
    spliced in where sorting puts them."""
    if key is None:  # two runs: orjson sorts each, the hash member goes between them
        a = _inner({k: v for k, v in record.items() if k < "hash"})
        c = _inner({k: v for k, v in record.items() if k > "hash"})
        digest = hashlib.sha256(_obj(a, c)).hexdigest()
        return _obj(a, b'"hash":"' + digest.encode("ascii") + b'"', c) + b"\n", digest, None
    before: dict[str, Any] = {}
    between: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for k, v in record.items():
        (before if k < "hash" else between if k < "mac" else after)[k] = v
    a, b, c = _inner(before), _inner(between), _inner(after)
    mac = None
    mac_member = b""
    if key is not None:
        mac = hmac.digest(key, prev_mac.encode("ascii") + _obj(a, b, c), "sha256").hex()
        mac_member = b'"mac":"' + mac.encode("ascii") + b'"'
    digest = hashlib.sha256(_obj(a, b, mac_member, c)).hexdigest()
    line = _obj(a, b'"hash":"' + digest.encode("ascii") + b'"', b, mac_member, c) + b"\n"
    return line, digest, mac


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


_PLAIN = frozenset({str, int, bool, type(None)})
_FAST_LIMIT = 100_000  # values looked at before the exact walk takes over (cycles)


def check_json_value(value: Any, path: str = "record") -> None:
    """Raise ``TypeError`` naming the offending path if ``value`` is not float-free plain JSON.

    Allowed: dict with str keys, list, tuple (written as an array), str, int, bool, None.
    Floats are rejected: their text form differs between languages, so a record
    holding one would not have a language-independent canonical encoding.

    A flat loop over exact types accepts the usual record in a few microseconds; anything
    else (a subclass, a float, a non-str key, a structure too large or circular) goes to
    the exact recursive walk, which names the path of what is wrong.
    """
    if not is_plain(value):
        _check(value, path, set())


def is_plain(value: Any) -> bool:
    """Whether ``value`` is plain float-free JSON by exact types (dict with str keys, list,
    tuple, str, int, bool, None): the fast screen of :func:`check_json_value`. False
    also for what may well be allowed (a subclass, a very large or circular structure):
    the exact walk decides those."""
    stack = [value]
    plain = _PLAIN
    seen = 0
    while stack:
        v = stack.pop()
        t = type(v)
        if t in plain:
            continue
        seen += 1
        if seen > _FAST_LIMIT:
            break
        if t is dict:
            for k in v:
                if type(k) is not str:
                    break
            else:
                stack.extend(v.values())
                continue
            break
        if t is list or t is tuple:
            stack.extend(v)
            continue
        break
    else:
        return True
    return False


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
