-- The floor as a witness (issue 12): each table's chain head at every round end the floor
-- received, signed with the floor's Ed25519 key (controller/audit/witness.py).
CREATE TABLE witness_checkpoints (
    table_id text NOT NULL, file text NOT NULL, seq bigint NOT NULL, hash text NOT NULL,
    ts text NOT NULL, key text NOT NULL, sig text NOT NULL,
    PRIMARY KEY (table_id, file, seq));
