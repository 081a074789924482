"""The tamper-evident audit log: a SHA-256 hash chain of JSON Lines records.

Every input event, every output and a header with the full profile are written
as one canonical JSON line each; each record carries ``seq``, the writer's
``ts``, the previous record's hash (``prev``) and its own ``hash`` (and, in a
keyed log, a chained HMAC ``mac``). Editing, deleting, inserting or reordering
a record breaks the chain at that point. The format is specified in
docs/audit-log.md so a third party can verify a log without this code.

The chain core imported here (canonical encoding, writer, verifier, keys,
anchors, file layout, set verification, sabot history) knows no devices and no
engine: callers hand it plain dicts. Three modules sit on top and use the
engine; import them by name (never from here, which the session imports):

- :mod:`controller.audit.replay` — re-run the engine on a log's inputs and compare;
- :mod:`controller.audit.recovery` — ``recover(path)`` after a crash;
- :mod:`controller.audit.report` — day reports, round reconstruction, HTML (a package).
"""

from controller import native

# (before the imports: a stale compiled module never runs, nor an extension module an
# older build left beside a source the package imports — of the two compiled here,
# linecheck is imported below, through verify, and replay by name)
native.prefer_source(__name__)

from controller.audit.anchors import (  # noqa: E402
    Anchor,
    AnchorFileError,
    AnchorSink,
    read_anchors,
)
from controller.audit.canonical import (  # noqa: E402
    GENESIS,
    MAC_ALG,
    canonical_bytes,
    key_id,
    record_hash,
    record_mac,
    seal,
)
from controller.audit.files import (  # noqa: E402
    LogName,
    log_path,
    open_table_log,
    parse_log_name,
    table_files,
)
from controller.audit.keys import KeyFileError, LoadedKey, load_key  # noqa: E402
from controller.audit.sets import Problem, SetCheck, TableCheck, verify_set  # noqa: E402
from controller.audit.verify import ChainStart, VerifyResult, verify_file, verify_lines  # noqa: E402
from controller.audit.writer import (  # noqa: E402
    DURABILITY_POLICIES,
    AuditLog,
    AuditLogError,
    HashChainWriter,
    TornCut,
)

__all__ = [
    "DURABILITY_POLICIES",
    "GENESIS",
    "MAC_ALG",
    "Anchor",
    "AnchorFileError",
    "AnchorSink",
    "AuditLog",
    "AuditLogError",
    "ChainStart",
    "HashChainWriter",
    "KeyFileError",
    "LoadedKey",
    "LogName",
    "Problem",
    "SetCheck",
    "TableCheck",
    "TornCut",
    "VerifyResult",
    "canonical_bytes",
    "key_id",
    "load_key",
    "log_path",
    "open_table_log",
    "parse_log_name",
    "read_anchors",
    "record_hash",
    "record_mac",
    "seal",
    "table_files",
    "verify_file",
    "verify_lines",
    "verify_set",
]
