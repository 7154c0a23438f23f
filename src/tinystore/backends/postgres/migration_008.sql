-- 008: batches. A batch collects jobs of any queues; once it is closed and every job of it has ended
-- (done, failed for good, or cancelled), its then job is added, in the transaction of the last end
-- (or of the close). `total` counts the jobs that joined it, `done`/`failed`/`cancelled` those that
-- ended so; `then_seq` is the then job once added, and the batch is kept while that job is. The
-- batch's row is what orders the ends of its jobs written side by side: each end updates it, so a
-- second waits for the first's commit and sees its counts.
CREATE TABLE {schema}.batches (
    id            text COLLATE "C" PRIMARY KEY,
    then_queue    text COLLATE "C" NOT NULL,
    then_payload  text NOT NULL,
    then_grp      text COLLATE "C",
    then_priority smallint NOT NULL DEFAULT 0,
    created_at    double precision NOT NULL,
    closed_at     double precision,
    total         bigint NOT NULL DEFAULT 0,
    done          bigint NOT NULL DEFAULT 0,
    failed        bigint NOT NULL DEFAULT 0,
    cancelled     bigint NOT NULL DEFAULT 0,
    then_seq      bigint
);
-- A then job leaving takes its batch with it.
CREATE INDEX batches_then ON {schema}.batches (then_seq) WHERE then_seq IS NOT NULL;
-- The batch a job belongs to, where it belongs to one.
ALTER TABLE {schema}.jobs ADD COLUMN batch text COLLATE "C";
CREATE INDEX jobs_batch ON {schema}.jobs (batch, state) WHERE batch IS NOT NULL;
