-- 004: what an operator reads, without a scan of every job, as SQLite's 007.
-- Jobs per queue and state, kept as rows come, change state and leave. A trigger never updates a shared
-- row: each statement that writes jobs appends what it changed per queue to count_changes, so that an
-- application's transaction that adds jobs (conn=, tx=), at whatever isolation level, conflicts with
-- nobody. The claim cycle of a queue (which holds the queue's lock) and maintenance fold a queue's
-- changes into its queue_counts row; stats() reads the row and the changes not folded yet.
CREATE TABLE {schema}.queue_counts (
    queue     text COLLATE "C" PRIMARY KEY,
    queued    bigint NOT NULL,
    running   bigint NOT NULL,
    done      bigint NOT NULL,
    failed    bigint NOT NULL,
    repeating bigint NOT NULL  -- of all these, how many repeat
);

CREATE TABLE {schema}.count_changes (
    queue     text COLLATE "C" NOT NULL,
    queued    bigint NOT NULL,
    running   bigint NOT NULL,
    done      bigint NOT NULL,
    failed    bigint NOT NULL,
    repeating bigint NOT NULL
);
CREATE INDEX count_changes_queue ON {schema}.count_changes (queue);

-- What one statement changed, per queue: the rows it added (+1 each), removed (-1 each), or moved from
-- one state to another (-1 before, +1 after), over the statement's transition tables.
CREATE FUNCTION {schema}.jobs_counted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {schema}.count_changes (queue, queued, running, done, failed, repeating)
        SELECT queue, count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
               count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'), count(repeat)
        FROM after_rows GROUP BY queue;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO {schema}.count_changes (queue, queued, running, done, failed, repeating)
        SELECT queue, -count(*) FILTER (WHERE state = 'queued'), -count(*) FILTER (WHERE state = 'running'),
               -count(*) FILTER (WHERE state = 'done'), -count(*) FILTER (WHERE state = 'failed'), -count(repeat)
        FROM before_rows GROUP BY queue;
    ELSE  -- a progress or a step changes no state: nothing is appended
        INSERT INTO {schema}.count_changes (queue, queued, running, done, failed, repeating)
        SELECT * FROM (
            SELECT queue, sum(n * (state = 'queued')::int) AS queued, sum(n * (state = 'running')::int) AS running,
                   sum(n * (state = 'done')::int) AS done, sum(n * (state = 'failed')::int) AS failed,
                   sum(n * (repeat IS NOT NULL)::int) AS repeating
            FROM (SELECT queue, state, repeat, 1 AS n FROM after_rows
                  UNION ALL SELECT queue, state, repeat, -1 FROM before_rows) AS rows
            GROUP BY queue
        ) AS d
        WHERE (d.queued, d.running, d.done, d.failed, d.repeating) <> (0, 0, 0, 0, 0);
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
