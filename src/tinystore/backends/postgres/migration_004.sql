-- 004: what an operator reads, without a scan of every job, as SQLite's 007.
-- Jobs per queue and state, kept as rows come, change state and leave. Every statement that writes a
-- queue's jobs runs under that queue's advisory lock (see _writer), so a queue's row is written by one
-- transaction at a time already. The triggers are per statement, over the rows it wrote (transition
-- tables): a claim or an add_many of many jobs writes each queue's row once, not once a job.
CREATE TABLE {schema}.queue_counts (
    queue     text COLLATE "C" PRIMARY KEY,
    queued    bigint NOT NULL,
    running   bigint NOT NULL,
    done      bigint NOT NULL,
    failed    bigint NOT NULL,
    repeating bigint NOT NULL  -- of all these, how many repeat
);

-- What one statement changed, per queue: the rows it added, removed, or moved from one state to another.
-- (A statement writing several queues holds all their locks already, taken in order.)
CREATE FUNCTION {schema}.jobs_counted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {schema}.queue_counts AS c (queue, queued, running, done, failed, repeating)
        SELECT queue, count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
               count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'), count(repeat)
        FROM after_rows GROUP BY queue ORDER BY queue
        ON CONFLICT (queue) DO UPDATE
        SET queued = c.queued + excluded.queued, running = c.running + excluded.running,
            done = c.done + excluded.done, failed = c.failed + excluded.failed,
            repeating = c.repeating + excluded.repeating;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE {schema}.queue_counts AS c
        SET queued = c.queued - d.queued, running = c.running - d.running, done = c.done - d.done,
            failed = c.failed - d.failed, repeating = c.repeating - d.repeating
        FROM (SELECT queue, count(*) FILTER (WHERE state = 'queued') AS queued,
                     count(*) FILTER (WHERE state = 'running') AS running,
                     count(*) FILTER (WHERE state = 'done') AS done,
                     count(*) FILTER (WHERE state = 'failed') AS failed, count(repeat) AS repeating
              FROM before_rows GROUP BY queue) AS d
        WHERE c.queue = d.queue;
    ELSE  -- UPDATE: each row once before (-1) and once after (+1); a progress or a step changes nothing
        UPDATE {schema}.queue_counts AS c
        SET queued = c.queued + d.queued, running = c.running + d.running, done = c.done + d.done,
            failed = c.failed + d.failed, repeating = c.repeating + d.repeating
        FROM (SELECT queue, sum(n * (state = 'queued')::int) AS queued, sum(n * (state = 'running')::int) AS running,
                     sum(n * (state = 'done')::int) AS done, sum(n * (state = 'failed')::int) AS failed,
                     sum(n * (repeat IS NOT NULL)::int) AS repeating
              FROM (SELECT queue, state, repeat, 1 AS n FROM after_rows
                    UNION ALL SELECT queue, state, repeat, -1 FROM before_rows) AS rows
              GROUP BY queue) AS d
        WHERE c.queue = d.queue AND (d.queued, d.running, d.done, d.failed, d.repeating) <> (0, 0, 0, 0, 0);
    END IF;
    RETURN NULL;
END
$body$;

CREATE TRIGGER jobs_counted_in AFTER INSERT ON {schema}.jobs
REFERENCING NEW TABLE AS after_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_counted();

CREATE TRIGGER jobs_counted_moved AFTER UPDATE ON {schema}.jobs
REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_counted();

CREATE TRIGGER jobs_counted_out AFTER DELETE ON {schema}.jobs
REFERENCING OLD TABLE AS before_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.jobs_counted();

-- A queue's failed jobs, and a group's jobs, in id order, as SQLite's 007.
CREATE INDEX jobs_failed ON {schema}.jobs (queue, id) WHERE state = 'failed';
CREATE INDEX jobs_group ON {schema}.jobs (queue, grp, id) WHERE grp IS NOT NULL;

-- The jobs kept when the schema took the triggers (one scan, once; creating the triggers locked the
-- jobs table against writes until this migration commits).
INSERT INTO {schema}.queue_counts (queue, queued, running, done, failed, repeating)
SELECT queue, count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
       count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'), count(repeat)
FROM {schema}.jobs GROUP BY queue;
