-- The floor as a witness (issue 12): each table's chain head at every round end the floor
-- received, signed with the floor's Ed25519 key (controller/audit/witness.py).
CREATE TABLE IF NOT EXISTS witness_checkpoints (
    table_id TEXT NOT NULL, file TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL,
    ts TEXT NOT NULL, key TEXT NOT NULL, sig TEXT NOT NULL,
    PRIMARY KEY (table_id, file, seq));
