-- The floor's index on one machine (issue 11). IF NOT EXISTS: an index made before
-- migrations were versioned is taken as it is.
CREATE TABLE IF NOT EXISTS audit_records (
    table_id TEXT NOT NULL, file TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL,
    record BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS audit_records_key ON audit_records (table_id, file, seq);
CREATE TABLE IF NOT EXISTS log_files (
    table_id TEXT NOT NULL, file TEXT NOT NULL, path TEXT NOT NULL, "offset" INTEGER NOT NULL,
    seq INTEGER NOT NULL, hash TEXT NOT NULL, mac TEXT NOT NULL, chain TEXT,
    broken TEXT, PRIMARY KEY (table_id, file));
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, table_id TEXT NOT NULL, file TEXT NOT NULL,
    seq INTEGER NOT NULL, code TEXT NOT NULL, severity TEXT NOT NULL, message TEXT NOT NULL,
    rule TEXT NOT NULL, ts TEXT NOT NULL, acked_by TEXT, acked_at TEXT, note TEXT,
    UNIQUE (table_id, file, seq, code));
