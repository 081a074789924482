-- A table's live state is kept by its place in the table's chain, the file's (date, part)
-- and then the seq: two floors saving the state of a commit that spanned two files had
-- put it back to an earlier file (a review, 28 Nov 2026). NULL: a row from before this.
ALTER TABLE table_state ADD COLUMN file_key text;
