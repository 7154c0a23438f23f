-- 011: batches. A batch collects jobs of any queues; once it is closed and every job of it has ended
-- (done, failed for good, or cancelled), its then job is added, in the transaction of the last end
-- (or of the close). `total` counts the jobs that joined it, `done`/`failed`/`cancelled` those that
-- ended so; `then_seq` is the then job once added, and the batch is kept while that job is.
CREATE TABLE tinystore_batches (
    id            TEXT PRIMARY KEY,
    then_queue    TEXT NOT NULL,
    then_payload  TEXT NOT NULL,
    then_grp      TEXT,
    then_priority INTEGER NOT NULL DEFAULT 0,
    created_at    REAL NOT NULL,
    closed_at     REAL,
    total         INTEGER NOT NULL DEFAULT 0,
    done          INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    cancelled     INTEGER NOT NULL DEFAULT 0,
    then_seq      INTEGER
);
-- A then job leaving takes its batch with it.
CREATE INDEX tinystore_batches_then ON tinystore_batches (then_seq) WHERE then_seq IS NOT NULL;
-- The batch a job belongs to, where it belongs to one.
ALTER TABLE tinystore_jobs ADD COLUMN batch TEXT;
CREATE INDEX tinystore_jobs_batch ON tinystore_jobs (batch, state) WHERE batch IS NOT NULL;
