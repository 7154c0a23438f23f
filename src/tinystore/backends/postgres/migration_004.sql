-- 004: jobs per queue and state, kept as rows come, change state and leave, as SQLite's 007, so that
-- stats() and an operator's page read a few rows instead of counting every job kept. Every statement
-- that writes a queue's jobs runs under that queue's advisory lock (see _writer), so a queue's count rows
-- are written one transaction at a time already. The triggers are per statement, with the rows it wrote
-- (transition tables): a claim or an add_many of many jobs writes each count row once, not once a job.
CREATE TABLE {schema}.state_counts (
    queue     text COLLATE "C" NOT NULL,
    state     text NOT NULL,
    jobs      bigint NOT NULL,
    repeating bigint NOT NULL,  -- how many of them repeat
    PRIMARY KEY (queue, state)
);

-- What one statement changed, per queue and state: its rows after (+1 each) and before (-1 each).
CREATE FUNCTION {schema}.jobs_counted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {schema}.state_counts AS c (queue, state, jobs, repeating)
        SELECT queue, state, count(*), count(repeat) FROM after_rows GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state) DO UPDATE
        SET jobs = c.jobs + excluded.jobs, repeating = c.repeating + excluded.repeating;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE {schema}.state_counts AS c SET jobs = c.jobs - d.jobs, repeating = c.repeating - d.repeating
        FROM (SELECT queue, state, count(*) AS jobs, count(repeat) AS repeating FROM before_rows
              GROUP BY queue, state) AS d
        WHERE c.queue = d.queue AND c.state = d.state;
    ELSE
        INSERT INTO {schema}.state_counts AS c (queue, state, jobs, repeating)
        SELECT queue, state, sum(n), sum(r) FROM (
            SELECT queue, state, 1 AS n, (repeat IS NOT NULL)::int AS r FROM after_rows
            UNION ALL
            SELECT queue, state, -1, -(repeat IS NOT NULL)::int FROM before_rows
        ) AS d
        GROUP BY queue, state HAVING sum(n) <> 0 OR sum(r) <> 0 ORDER BY queue, state
        ON CONFLICT (queue, state) DO UPDATE
        SET jobs = c.jobs + excluded.jobs, repeating = c.repeating + excluded.repeating;
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

-- The jobs kept when the schema took the triggers (one scan, once; creating the triggers locked the
-- jobs table against writes until this migration commits).
INSERT INTO {schema}.state_counts (queue, state, jobs, repeating)
SELECT queue, state, count(*), count(repeat) FROM {schema}.jobs GROUP BY queue, state;
