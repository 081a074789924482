"""The checks of a log's lines, each on its own and a run at a time: :class:`ChainState`,
the running chain (last seq, hash, MAC) that :mod:`controller.audit.verify` feeds.

A line passes when it is a canonical JSON record with no float, its ``hash`` is the
SHA-256 of the line without its ``hash`` member, its ``mac`` (keyed log) is right, and it
follows the last record (seq + 1, ``prev`` = the last hash). :meth:`ChainState.block`
checks a whole run of raw lines in a few C calls and changes nothing when any line of it
fails; :meth:`ChainState.check` then takes them one at a time and names the first fault
(:class:`BadLine`: reason, ``problem``, diagnosis). The numbered list of checks and the
result's fields: :mod:`controller.audit.verify`, docs/audit-log.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import operator
import re
from collections.abc import Collection, Mapping
from typing import Any

import orjson

from controller.audit.canonical import GENESIS, canonical_text, key_id

_STR_FIELDS = ("ts", "kind", "prev", "hash")
_HEX64 = re.compile(r"[0-9a-f]{64}")
# The fast paths' float screen, with no pass of its own. Every float orjson reads holds a
# ``.``, an ``E`` or an ``e``; orjson writes one back with a ``.`` or an exponent sign
# (``1e+16``, ``2e-7``). ``_MARKED`` turns ``.``, ``E``, ``+`` and ``-`` into ``?``, which
# no JSON number may hold but any string may, before decoding: a float with a fraction,
# an ``E`` or a signed exponent then fails to decode, and one written ``1e16`` decodes but
# does not encode back to the same bytes — either way the exact path takes the line and
# names the float. (So does a negative integer, which our records never hold.) Marking
# changes no string's escaping; it can change the order of keys that hold those
# characters (``"x-"`` sorts before ``"x0"``, ``"x?"`` after it), which ours never do: a
# line with a marked character in a key (:func:`_mark_in_key`) goes to the exact path.
_MARKED = bytes.maketrans(b".E+-", b"????")
#: the same, for a run of lines made one JSON array: a raw newline (never inside a JSON
#: string, where it is escaped) becomes the comma between two records
_MARKED_RUN = bytes.maketrans(b".E+-\n", b"????,")
_SORTED = orjson.OPT_SORT_KEYS
_HASH, _KIND, _PREV, _SEQ, _TS = map(operator.itemgetter, ("hash", "kind", "prev", "seq", "ts"))
_HEXDIGEST = operator.methodcaller("hexdigest")

#: a ``?``, then the rest of a string up to its closing quote, which is a key's (``":``).
#: ``?`` is left out of the run, so each ``?`` is scanned past once: a string of many
#: marks costs a pass, not its square
_MARK_ENDS_KEY = re.compile(rb'\?[^"?]*+":')


def _mark_in_key(marked: bytes | bytearray) -> bool:
    """Does a key of this (valid, canonical) JSON hold a ``?`` (a marked character, or its
    own)? Its line then goes to the exact path. This runs on every record: one search.
    With escaped backslashes and quotes taken out first (rare in records), every quote
    left opens or closes a string, and a ``:`` follows only a key's closing quote."""
    if b"\\" in marked:
        marked = marked.replace(b"\\\\", b"").replace(b'\\"', b"")
    return _MARK_ENDS_KEY.search(marked) is not None


# Classification of the first bad line (VerifyResult.problem).
EDITED = "edited"  # a record's content changed (hash mismatch, not canonical, unparseable)
REHASHED = "rehashed"  # a record changed and its hash recomputed (next prev breaks)
DELETED = "deleted"  # records missing (seq gap, none of them further on)
INSERTED = "inserted"  # an extra record (repeated seq / chain skips over it)
REORDERED = "reordered"  # records out of order (the missing seq is further on)
TORN = "torn"  # the last line was cut by an interrupted write
START = "start"  # the file does not start where its chain says it should
MAC = "mac"  # keyed log: a MAC is wrong or missing (rewritten or forged without the key)
WRONG_KEY = "wrong-key"  # keyed log verified with another key: nothing could be checked


class _FloatInRecord(ValueError):
    pass


def _no_float(text: str) -> Any:
    raise _FloatInRecord(text)


_DECODER = json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float)


def _without_member(body: str, key: str, value: str) -> str | None:
    """``body`` (a canonical line, no ``\\n``) without its top-level ``"key":"value"`` member.

    The canonical encoding of a record minus one key is the canonical line
    minus that member and one comma, so the hash (and MAC) can be checked on
    the line itself without encoding the record again. The member is found by
    its exact text: a nested copy with the same value would have to contain a
    hash of itself, and a quote inside a string is always escaped.
    """
    member = f'"{key}":"{value}"'
    i = body.find(member)
    if i < 0:
        return None
    j = i + len(member)
    if body[j] == ",":
        return body[:i] + body[j + 1:]
    if body[i - 1] == ",":  # the last member
        return body[:i - 1] + body[j:]
    return body[:i] + body[j:]  # the only member


def _text_of(raw: bytes) -> tuple[str | None, str | None]:
    """A raw line as text, or why it is not text (the slow path's input)."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        if not raw.endswith(b"\n"):  # cut inside a character: report it as torn
            return raw.decode("utf-8", "replace"), None
        return None, f"line is not valid UTF-8 ({exc.reason} at byte {exc.start})"


def _without_member_b(body: bytes, member: bytes) -> bytes | None:
    """:func:`_without_member` on bytes, for the fast path (``member`` is the whole
    ``"key":"value"`` text)."""
    i = body.find(member)
    if i < 0:
        return None
    j = i + len(member)
    if body[j:j + 1] == b",":
        return body[:i] + body[j + 1:]
    if body[i - 1:i] == b",":
        return body[:i - 1] + body[j:]
    return body[:i] + body[j:]


class BadLine(Exception):
    def __init__(self, seq: int | None, reason: str, problem: str, detail: str | None = None):
        super().__init__(reason)
        self.seq = seq
        self.reason = reason
        self.problem = problem
        self.detail = detail


def declared_key_id(record: Mapping[str, Any]) -> str | None:
    chain = record.get("chain")
    if isinstance(chain, Mapping) and isinstance(chain.get("mac"), Mapping):
        kid = chain["mac"].get("key_id")
        return kid if isinstance(kid, str) else None
    return None



class ChainState:
    """The running chain: last seq, hash and mac, and the hash before the last (diagnosis)."""

    def __init__(self, seq: int, hash_: str, mac: str, *, keyed: bool, key: bytes | None):
        self.last_seq = seq
        self.last_hash = hash_
        self.before_last_hash: str | None = None
        self.last_mac = mac
        self.keyed = keyed
        self.key = key
        self.macs = 0

    def block(self, raws: list[bytes], want: Collection[int], hashes: dict[int, str]) -> bool:
        """Check a run of raw lines at once, or change nothing and return False (then they
        are checked one by one, and any fault is named there).

        Everything a line's record must be is checked on the whole run by two C calls: the
        run as one JSON array decodes (marked: :data:`_MARKED`, so no float does) and
        encodes back to the same bytes (canonical). Then each line in turn: its fields'
        types, its hash on its raw bytes, its MAC, its link."""
        if not raws[-1].endswith(b"\n"):
            return False
        # each line's newline now a comma, the last one the array's end; a bytearray's
        # translate takes a third less time than a bytes' here, and the join is the one copy
        marked = bytearray().join([b"[", *raws]).translate(_MARKED_RUN)
        marked[-1] = 93  # "]"
        try:
            records = orjson.loads(marked)
        except orjson.JSONDecodeError:
            return False
        try:
            canonical = orjson.dumps(records, option=_SORTED)
        except orjson.JSONEncodeError:  # nested deeper than orjson writes: one by one
            return False
        if len(records) != len(raws) or canonical != marked or _mark_in_key(marked):
            return False
        if not self.keyed and self.key is None:
            return self._plain_run(raws, records, want, hashes)
        saved = (self.last_seq, self.last_hash, self.before_last_hash, self.last_mac,
                 self.macs)
        seq, last, before, mac_head = self.last_seq, self.last_hash, self.before_last_hash, \
            self.last_mac
        macs = 0
        keyed, key = self.keyed, self.key
        sha256 = hashlib.sha256
        found: list[tuple[int, str]] = []
        for raw, record in zip(raws, records, strict=True):
            if type(record) is not dict:
                break
            digest = record.get("hash")
            mac = record.get("mac")
            number = record.get("seq")
            if (type(number) is not int or number != seq + 1 or type(digest) is not str
                    or record.get("prev") != last or type(record.get("ts")) is not str
                    or type(record.get("kind")) is not str):
                break
            member = b'"hash":"' + digest.encode() + b'"'
            i = raw.find(member)  # the line without it: as _without_member_b, inlined
            if i < 0:
                break
            j = i + len(member)
            unhashed = (raw[:i] + raw[j + 1:-1] if raw[j] == 44  # ","
                        else raw[:i - 1] + raw[j:-1] if raw[i - 1] == 44 else raw[:i] + raw[j:-1])
            if sha256(unhashed).hexdigest() != digest:
                break
            if mac is None:
                if keyed or key is not None:
                    break
            else:
                if type(mac) is not str or not keyed or not _HEX64.fullmatch(mac):
                    break
                if key is not None:
                    signed = _without_member_b(unhashed, b'"mac":"' + mac.encode() + b'"')
                    if signed is None or not hmac.compare_digest(hmac.digest(
                            key, mac_head.encode("ascii") + signed, "sha256").hex(), mac):
                        break
                macs += 1
                mac_head = mac
            seq += 1
            before, last = last, digest
            if seq in want:
                found.append((seq, digest))
        else:
            self.last_seq, self.last_hash, self.before_last_hash = seq, last, before
            self.last_mac, self.macs = mac_head, self.macs + macs
            hashes.update(found)
            return True
        (self.last_seq, self.last_hash, self.before_last_hash, self.last_mac,
         self.macs) = saved
        return False

    def _plain_run(self, raws: list[bytes], records: list[Any], want: Collection[int],
                   hashes: dict[int, str]) -> bool:
        """:meth:`block` for a log without MACs, each check done on the whole run by C-level
        maps; only the hash is computed in a loop per record. The same checks: every record
        a dict with an int ``seq`` one above the last, str ``hash``/``prev``/``ts``/``kind``,
        ``prev`` the previous hash, no ``mac``, and the hash the SHA-256 of the raw line
        without its ``"hash":…`` member. A run this does
        not accept changes nothing (the caller checks it line by line and names the fault).

        The member removed is the line's first ``"hash":"<64 hex>"``: a nested one that
        comes first leaves the record's own hash in the bytes hashed, so the digest cannot
        match and the run goes to the line-by-line path, which finds the right one."""
        n = len(records)
        try:  # not a dict (TypeError) or a field missing (KeyError): line by line
            # no MAC in this log: any is for the exact checks. A look-up a record (faster
            # than any(map(...))) takes a fifth of the time of a search of the run's text
            # for '"mac":' (which the run's every quote and colon slow down)
            for record in records:
                if "mac" in record:
                    return False
            digests = list(map(_HASH, records))
            prevs = list(map(_PREV, records))
            seqs = list(map(_SEQ, records))
            kinds = set(map(type, map(_KIND, records)))
            stamps = set(map(type, map(_TS, records)))
        except (KeyError, TypeError):
            return False
        first = self.last_seq + 1
        # (a hash that is not a str fails its comparison with a hexdigest below, and a prev
        # must equal the hash before it)
        if (seqs != list(range(first, first + n)) or set(map(type, seqs)) != {int}
                or kinds != {str} or stamps != {str}
                or prevs[0] != self.last_hash or prevs[1:] != digests[:-1]):
            return False
        sha256 = hashlib.sha256
        for raw, digest in zip(raws, digests, strict=True):
            i = raw.find(b'"hash":"')  # "hash":"<64 hex>", is 74 bytes; no final newline
            if sha256(raw[:i] + raw[i + 74:-1]).hexdigest() != digest:
                return False
        for seq in want:
            if first <= seq < first + n:
                hashes[seq] = digests[seq - first]
        self.before_last_hash = digests[-2] if n > 1 else self.last_hash
        self.last_seq, self.last_hash = seqs[-1], digests[-1]
        return True

    def check(self, line: str | bytes | None, decode_error: str | None, *, is_last: bool,
              first: bool, lineno: int) -> None:
        """Check one line, or raise :class:`BadLine`. A raw line that is a sound record goes
        through :meth:`_fast`: orjson decodes it, and its hash and MAC are checked on the
        raw bytes. Anything the fast path does not accept as sound — whatever it is — is
        judged again by the exact checks below, which name the problem."""
        if isinstance(line, bytes):
            if self._fast(line, is_last=is_last, first=first, lineno=lineno):
                return
            line, decode_error = _text_of(line)
        self._exact(line, decode_error, is_last=is_last, first=first, lineno=lineno)

    def _fast(self, raw: bytes, *, is_last: bool, first: bool, lineno: int) -> bool:
        if not raw.endswith(b"\n"):
            return False
        body = raw[:-1]
        marked = body.translate(_MARKED)
        try:
            record = orjson.loads(marked)
        except orjson.JSONDecodeError:  # not JSON, or a float with a '.' or an 'E'
            return False
        if type(record) is not dict:
            return False
        seq = record.get("seq")
        digest = record.get("hash")
        prev = record.get("prev")
        mac = record.get("mac")
        if (type(seq) is not int or type(digest) is not str or type(prev) is not str
                or type(record.get("ts")) is not str or type(record.get("kind")) is not str):
            return False  # _STR_FIELDS, spelt out (this is per record)
        try:
            if (orjson.dumps(record, option=orjson.OPT_SORT_KEYS) != marked
                    or _mark_in_key(marked)):
                return False  # not canonical, or perhaps not (a key marked)
        except orjson.JSONEncodeError:  # nested deeper than orjson writes: the slow path
            return False
        unhashed = _without_member_b(body, b'"hash":"' + digest.encode() + b'"')
        if unhashed is None or hashlib.sha256(unhashed).hexdigest() != digest:
            return False
        if mac is None:
            if self.keyed or self.key is not None:
                return False
        else:
            if type(mac) is not str or not _HEX64.fullmatch(mac) or not self.keyed:
                return False
            if self.key is not None:
                signed = _without_member_b(unhashed, b'"mac":"' + mac.encode() + b'"')
                if signed is None or not hmac.compare_digest(hmac.digest(
                        self.key, self.last_mac.encode("ascii") + signed, "sha256").hex(),
                        mac):
                    return False
        self._check_link(record, seq, first=first, lineno=lineno)  # raises as the exact path
        if mac is not None:
            self.macs += 1
            self.last_mac = mac
        self.before_last_hash = self.last_hash
        self.last_seq, self.last_hash = seq, digest
        return True

    def _exact(self, text: str | None, decode_error: str | None, *, is_last: bool,
               first: bool, lineno: int) -> None:
        if decode_error is not None or text is None:
            raise BadLine(None, decode_error or "unreadable line", EDITED)
        terminated = text.endswith("\n")
        body = text[:-1] if terminated else text

        record: Any = None
        float_error: str | None = None
        parse_error: str | None = None
        try:
            record = _DECODER.decode(body)
        except _FloatInRecord as float_text:  # (names of their own: compiled, a name has one type)
            float_error = f"record contains a float ({float_text}); records never contain floats"
        except RecursionError:
            parse_error = "does not parse as JSON (nested too deep to read)"
        except ValueError as exc:
            parse_error = f"does not parse as JSON ({exc})"
        claimed = record.get("seq") if isinstance(record, dict) else None
        seq = claimed if type(claimed) is int else None

        if not terminated:
            if is_last:
                raise BadLine(
                    seq, "torn last line: no newline terminator (the write was interrupted)",
                    TORN, "recover() cuts it back to the last whole record")
            raise BadLine(seq, "line has no newline terminator", EDITED)
        if parse_error is not None:
            if is_last:
                raise BadLine(None, f"torn last line: {parse_error}", TORN)
            raise BadLine(None, f"line {parse_error}", EDITED)
        if float_error is not None:
            raise BadLine(None, float_error, EDITED)
        if not isinstance(record, dict):
            raise BadLine(None, f"line is not a JSON object (got {type(record).__name__})",
                           EDITED)
        if seq is None:
            raise BadLine(None, f"missing or ill-typed field 'seq' (got {claimed!r})", EDITED)
        for k in _STR_FIELDS:
            if not isinstance(record.get(k), str):
                raise BadLine(seq, f"missing or ill-typed field {k!r} (got {record.get(k)!r})",
                               EDITED)

        if canonical_text(record) != body:
            crlf = body.endswith("\r") and canonical_text(record) == body[:-1]
            raise BadLine(seq, "line is not in canonical form (re-encoded, or duplicate keys)"
                          + ("; it ends in CR LF where the table writes LF: the file's line "
                             "endings were converted (an editor, a text-mode copy) — verify a "
                             "copy with LF endings to check the records themselves" if crlf
                             else ""), EDITED)

        unhashed = _without_member(body, "hash", record["hash"])
        if unhashed is None or \
                hashlib.sha256(unhashed.encode("utf-8")).hexdigest() != record["hash"]:
            raise BadLine(seq, "hash mismatch: record was edited", EDITED)

        # the link first: a record deleted, repeated or moved breaks the MAC chain of the
        # genuine record after it too, and "mac mismatch: not what the key holder wrote"
        # called a deletion a forgery (a review); a record that links and still fails its
        # MAC was rewritten or forged
        self._check_link(record, seq, first=first, lineno=lineno)
        self._check_mac(record, unhashed, seq, first=first, is_last=is_last)

        self.before_last_hash = self.last_hash
        self.last_seq, self.last_hash = seq, record["hash"]

    def _check_mac(self, record: dict[str, Any], unhashed: str, seq: int, *, first: bool,
                   is_last: bool) -> None:
        mac = record.get("mac")
        if mac is None:
            if self.keyed or self.key is not None:
                why = ("the file is keyed (its first record declares a MAC chain)" if self.keyed
                       else "a key was given, so every record must carry one")
                raise BadLine(seq, f"record has no mac: {why}", MAC,
                               "mac removed, or record written by someone without the key")
            return
        if not isinstance(mac, str) or not _HEX64.fullmatch(mac):
            raise BadLine(seq, f"ill-typed field 'mac' (got {mac!r})", EDITED)
        if not self.keyed:
            raise BadLine(seq, "record has a mac but the file's first record declares no "
                           "MAC chain", MAC, "first record replaced, or record from another log")
        if self.key is not None:
            body = _without_member(unhashed, "mac", mac)
            message = self.last_mac.encode("ascii") + (body or "").encode("utf-8")
            expected = hmac.digest(self.key, message, "sha256").hex()
            if body is None or not hmac.compare_digest(expected, mac):
                if first:
                    declared = declared_key_id(record)
                    if declared is not None and declared != key_id(self.key):
                        raise BadLine(
                            seq, f"wrong key: the log's MACs were made with key {declared}, "
                            f"the key given is {key_id(self.key)}: the log was re-signed by "
                            "someone else (or the key given is not this table's)", WRONG_KEY,
                            "re-keyed: every record rewritten under another key")
                detail = ("forged record appended by someone without the key (or the last "
                          "record rewritten)" if is_last else
                          "record rewritten with its hash recomputed, or forged, by someone "
                          "without the key")
                raise BadLine(seq, "mac mismatch: the record is not what the key holder wrote",
                               MAC, detail)
        self.macs += 1
        self.last_mac = mac

    def _check_link(self, record: dict[str, Any], seq: int, *, first: bool, lineno: int) -> None:
        expected = self.last_seq + 1
        if seq != expected:
            if first:
                what = ("record(s) missing at the start" if seq > expected
                        else "bad sequence number")
                raise BadLine(seq, f"first record has seq {seq}, expected {expected}: {what}",
                               START, "the start of the file was cut off or replaced")
            if seq > expected:
                raise BadLine(seq, f"seq {seq} follows seq {self.last_seq}: record(s) missing "
                               "(deleted or moved)", "gap")
            if seq == self.last_seq and record["prev"] == self.before_last_hash:
                detail = (f"a record was inserted at line {lineno - 1}: this record chains to "
                          f"the one before it")
                problem = INSERTED
            elif seq == self.last_seq:
                detail, problem = f"seq {seq} appears twice (line {lineno - 1} and here)", INSERTED
            else:
                detail, problem = f"seq {seq} came earlier in the file", REORDERED
            raise BadLine(seq, f"seq {seq} follows seq {self.last_seq}: record repeated or "
                           "out of order", problem, detail)
        if record["prev"] != self.last_hash:
            if first:
                start = "GENESIS (64 zeros)" if self.last_hash == GENESIS else self.last_hash
                raise BadLine(
                    seq, f"prev of the first record does not match the chain start {start}: "
                    "the log does not start where it should", START)
            raise BadLine(
                seq, "prev does not match the previous record's hash: a record was deleted, "
                "inserted or reordered before this one", REHASHED,
                f"the record at line {lineno - 1} was replaced, or edited and its hash "
                "recomputed")
