"""The tamper-evident audit log: a SHA-256 hash chain of JSON Lines records.

Every input event, every output and a header with the full profile are written
as one canonical JSON line each; each record carries ``seq``, the writer's
``ts``, the previous record's hash (``prev``) and its own ``hash``. Editing,
deleting, inserting or reordering a record breaks the chain at that point.
The format is specified in docs/audit-log.md so a third party can verify a log
without this code.

This package knows no devices and no engine: callers hand it plain dicts.
"""

from controller.audit.canonical import GENESIS, canonical_bytes, record_hash, seal
from controller.audit.verify import VerifyResult, verify_file, verify_lines
from controller.audit.writer import (
    DURABILITY_POLICIES,
    AuditLog,
    AuditLogError,
    HashChainWriter,
)

__all__ = [
    "DURABILITY_POLICIES",
    "GENESIS",
    "AuditLog",
    "AuditLogError",
    "HashChainWriter",
    "VerifyResult",
    "canonical_bytes",
    "record_hash",
    "seal",
    "verify_file",
    "verify_lines",
]
