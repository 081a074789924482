"""The one boundary decoder: what it refuses, and that it never raises anything else."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jsontext import MAX_DEPTH, JsonTextError, loads


@pytest.mark.parametrize(("text", "why"), [
    (b'{"detail": "\\ud800"}', "lone surrogate"),
    ('{"dealer": "\\udfff"}', "lone surrogate"),
    ('{"dealer": "\ud800"}', "lone surrogate"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b"[" * 1000 + b"]" * 1000, "nested deeper"),
    (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nested deeper"),
    (b'{"n": ' + b"9" * 4301 + b"}", "out of range"),
    (b'{"n": 1e400}', "out of range"),
    (b'{"n": NaN}', "not valid JSON"),
    (b'{"type" "card"}', "not valid JSON"),
    (b"", "not valid JSON"),
])
def test_refused_with_a_reason(text: bytes | str, why: str) -> None:
    with pytest.raises(JsonTextError, match=why):
        loads(text)


def test_accepted_text_round_trips() -> None:
    assert loads(b'{"a": "\\ud83d\\ude00", "b": [1, {"c": "\xc3\xa9"}]}') == {
        "a": "😀", "b": [1, {"c": "é"}]}
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loads(deep) == json.loads(deep)


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_are_refused(data: bytes) -> None:
    try:
        value = loads(data)
    except JsonTextError:
        return
    # whatever is accepted can be written back as UTF-8 JSON
    json.dumps(value, ensure_ascii=False).encode("utf-8")


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(),
                    lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids)))
def test_valid_json_is_read_as_the_standard_library_reads_it(value: object) -> None:
    text = json.dumps(value)
    try:
        assert loads(text) == json.loads(text)
    except JsonTextError as e:
        assert "surrogate" in str(e) or "nested" in str(e)
