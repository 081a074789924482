-- What any floor process serves (issue 12): each table's live state as its last committed
-- record left it, and where each round of a table's day lies in its log, for the hand
-- look-up. Written in the transaction of the run that changed them.
CREATE TABLE table_state (
    table_id text PRIMARY KEY, file text NOT NULL, seq bigint NOT NULL,
    ts text, summary jsonb NOT NULL);
CREATE TABLE rounds (
    table_id text NOT NULL, file text NOT NULL, shoe integer NOT NULL, round integer NOT NULL,
    start_seq bigint NOT NULL, end_seq bigint, ts text NOT NULL, result text,
    PRIMARY KEY (table_id, file, shoe, round));
