"""The fast canonical encoding is the canonical encoding, byte for byte.

The writer seals each record with one orjson encoding of its members
(:func:`~controller.audit.canonical.seal_line`) instead of three stdlib encodings; the
verifier checks canonical form with :func:`~controller.audit.canonical.plain_bytes`. The
format (docs/audit-log.md) is defined by the stdlib's ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)``: these properties hold them to it on records
of every shape a record may take, with any Unicode text (control characters, U+2028,
astral planes), any 64-bit and larger integers, nested objects and arrays, and keys that
sort before, between and after ``hash`` and ``mac``.
"""

from __future__ import annotations

import secrets
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.audit.canonical import (
    GENESIS,
    canonical_bytes,
    plain_bytes,
    record_hash,
    record_mac,
    seal_line,
)
from tests.budget import examples

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
keys = st.one_of(text, st.sampled_from(["a", "hash0", "hasi", "h", "m", "mab", "mac0", "z",
                                        "kind", "event", "data", "é", "😀", "\u2028"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), text,
                    st.integers(min_value=-(2**70), max_value=2**70))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)), max_leaves=20)
records = st.dictionaries(keys.filter(lambda k: k not in ("hash", "mac")), values,
                          max_size=8)


@settings(max_examples=examples(400), deadline=None)
@given(values)
def test_plain_bytes_is_the_stdlib_encoding(value: Any) -> None:
    assert plain_bytes({"v": value}) == canonical_bytes({"v": value})


@settings(max_examples=examples(400), deadline=None)
@given(records, st.booleans(), st.integers(0, 2**40))
def test_seal_line_is_the_three_step_seal(record: dict[str, Any], keyed: bool,
                                          seq: int) -> None:
    record = {**record, "seq": seq, "ts": "2026-11-21T10:00:00.000Z", "prev": GENESIS}
    key = secrets.token_bytes(32) if keyed else None
    prev_mac = secrets.token_hex(32) if keyed else GENESIS
    line, digest, mac = seal_line(record, key, prev_mac)
    expected = dict(record)
    if key is not None:
        expected["mac"] = record_mac(key, prev_mac, expected)
        assert mac == expected["mac"]
    else:
        assert mac is None
    expected["hash"] = record_hash(expected)
    assert digest == expected["hash"]
    assert line == canonical_bytes(expected) + b"\n"


floats = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=examples(300), deadline=None)
@given(records, floats, st.sampled_from(["top", "nested", "list"]), st.booleans())
def test_a_float_anywhere_in_a_rehashed_record_fails_verification(
        record: dict[str, Any], number: float, where: str, keyed: bool) -> None:
    """The verifier's fast path (orjson) never lets a float through: a record that holds
    one, even with its hash and MAC recomputed, is a bad line naming the float."""
    import json
    import tempfile
    from pathlib import Path

    from controller.audit import verify_file

    key = secrets.token_bytes(32) if keyed else None
    record = {**record, "kind": "note", "seq": 1, "ts": "2026-11-21T10:00:00.000Z",
              "prev": GENESIS}
    if key is not None:
        record["chain"] = {"mac": {"alg": "HMAC-SHA-256", "key_id": "0" * 16}}
    planted = {"top": number, "nested": {"x": [1, {"y": number}]}, "list": [0, number, "a"]}
    record["zz_planted"] = planted[where]
    body = {k: v for k, v in record.items()}
    if key is not None:
        body["mac"] = record_mac(key, GENESIS, body)
    body["hash"] = record_hash(body)
    line = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        path.write_text(line, encoding="utf-8")
        result = verify_file(path, key=key)
    assert not result.ok
    assert "float" in (result.reason or ""), result.reason
