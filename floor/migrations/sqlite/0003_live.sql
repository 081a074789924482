-- What any floor process serves (issue 12): each table's live state as its last committed
-- record left it, and where each round of a table's day lies in its log, for the hand
-- look-up. Written in the transaction of the run that changed them.
CREATE TABLE IF NOT EXISTS table_state (
    table_id TEXT PRIMARY KEY, file TEXT NOT NULL, seq INTEGER NOT NULL,
    ts TEXT, summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (
    table_id TEXT NOT NULL, file TEXT NOT NULL, shoe INTEGER NOT NULL, round INTEGER NOT NULL,
    start_seq INTEGER NOT NULL, end_seq INTEGER, ts TEXT NOT NULL, result TEXT,
    PRIMARY KEY (table_id, file, shoe, round));
