"""Reading a log's records (controller/audit/records.py): a run of whole lines is decoded
in one call, and a run that might hold a bad line is read line by line so that the first
bad one is named — the same records, or the same error, either way."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from controller.audit.records import READ_BYTES, LogReader, LogReadError
from controller.jsontext import MAX_DEPTH


def _log(tmp_path: Path, records: list[bytes]) -> Path:
    path = tmp_path / "day.jsonl"
    path.write_bytes(b"".join(r + b"\n" for r in records))
    return path


def _plain(n: int) -> list[bytes]:
    return [orjson.dumps({"seq": i, "kind": "output", "output": {"cards": ["7H", "KD"]}})
            for i in range(1, n + 1)]


def test_a_run_of_records_reads_as_each_line_decoded_on_its_own(tmp_path: Path) -> None:
    lines = _plain(8000)  # several runs of READ_BYTES
    assert sum(map(len, lines)) > 3 * READ_BYTES
    got = list(LogReader([_log(tmp_path, lines)]))
    assert [r.record for r in got] == [orjson.loads(line) for line in lines]
    assert [r.line for r in got] == list(range(1, 8001))


def test_a_record_nested_too_deep_is_named_by_its_line(tmp_path: Path) -> None:
    lines = _plain(50)
    deep = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    lines[37] = b'{"seq":38,"kind":"output","output":' + deep + b"}"
    with pytest.raises(LogReadError) as info:
        list(LogReader([_log(tmp_path, lines)]))
    assert info.value.line == 38 and "nested deeper" in str(info.value)


def test_many_brackets_that_do_not_nest_deep_are_read(tmp_path: Path) -> None:
    # more opening brackets on a line than the depth allowed sends its run line by line,
    # where the line passes: it is not nested deep
    lines = _plain(50)
    lines[10] = orjson.dumps({"seq": 11, "kind": "output", "output": [[1]] * (MAX_DEPTH + 5)})
    lines[11] = orjson.dumps({"seq": 12, "kind": "output", "output": [{"a": 1}] * MAX_DEPTH})
    got = [r.record for r in LogReader([_log(tmp_path, lines)])]
    assert got == [orjson.loads(line) for line in lines]


def test_the_records_before_a_bad_line_come_first_and_the_next_file_after_it(
        tmp_path: Path) -> None:
    # a run read line by line hands on the records before its bad line, then the error;
    # a caller that goes on gets the next file's records (the reader hands on a run at
    # a time: a review found that the next file was dropped once)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    lines = _plain(300)
    lines[200] = b"not json"
    bad, good = _log(tmp_path / "a", lines), _log(tmp_path / "b", _plain(5))
    reader = iter(LogReader([bad, tmp_path / "missing.jsonl", good]))
    got = []
    with pytest.raises(LogReadError) as info:
        for rec in reader:
            got.append(rec.record["seq"])
    assert got == list(range(1, 201)) and info.value.line == 201
    with pytest.raises(LogReadError) as info:
        next(reader)
    assert "no such file" in str(info.value)
    assert [(r.file, r.line) for r in reader] == [(str(good), n) for n in range(1, 6)]
