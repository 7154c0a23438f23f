-- 007: what an operator reads, without a scan of every job.
-- Jobs per queue and state, kept as rows come, change state and leave, so that stats() and an operator's
-- page read a row per queue instead of counting every job kept. Triggers keep them, so that every writer
-- of the file does (an application's own connection, a process of an earlier version); each is one
-- statement on the queue's row. Queued jobs are split into scheduled and waiting when read
-- (backends/_counts.py).
CREATE TABLE tinystore_queue_counts (
    queue     TEXT PRIMARY KEY,
    queued    INTEGER NOT NULL,
    running   INTEGER NOT NULL,
    done      INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    repeating INTEGER NOT NULL  -- of all these, how many repeat
) WITHOUT ROWID;

CREATE TRIGGER tinystore_jobs_counted_in
AFTER INSERT ON tinystore_jobs
BEGIN
    INSERT INTO tinystore_queue_counts (queue, queued, running, done, failed, repeating)
    VALUES (NEW.queue, NEW.state = 'queued', NEW.state = 'running', NEW.state = 'done', NEW.state = 'failed',
            NEW.repeat IS NOT NULL)
    ON CONFLICT (queue) DO UPDATE SET queued = queued + excluded.queued, running = running + excluded.running,
        done = done + excluded.done, failed = failed + excluded.failed, repeating = repeating + excluded.repeating;
END;

CREATE TRIGGER tinystore_jobs_counted_moved
AFTER UPDATE OF state, repeat ON tinystore_jobs
WHEN OLD.state IS NOT NEW.state OR (OLD.repeat IS NULL) IS NOT (NEW.repeat IS NULL)
BEGIN
    UPDATE tinystore_queue_counts
    SET queued = queued + (NEW.state = 'queued') - (OLD.state = 'queued'),
        running = running + (NEW.state = 'running') - (OLD.state = 'running'),
        done = done + (NEW.state = 'done') - (OLD.state = 'done'),
        failed = failed + (NEW.state = 'failed') - (OLD.state = 'failed'),
        repeating = repeating + (NEW.repeat IS NOT NULL) - (OLD.repeat IS NOT NULL)
    WHERE queue = NEW.queue;
END;

CREATE TRIGGER tinystore_jobs_counted_out
AFTER DELETE ON tinystore_jobs
BEGIN
    UPDATE tinystore_queue_counts
    SET queued = queued - (OLD.state = 'queued'), running = running - (OLD.state = 'running'),
        done = done - (OLD.state = 'done'), failed = failed - (OLD.state = 'failed'),
        repeating = repeating - (OLD.repeat IS NOT NULL)
    WHERE queue = OLD.queue;
END;

-- A queue's failed jobs, and a group's jobs, in id order: a page filtered by either reads only those
-- (queue.jobs). Few jobs fail, and a job's group never changes, so neither index costs the claim or
-- the settlement of most jobs anything.
CREATE INDEX tinystore_jobs_failed ON tinystore_jobs (queue, id) WHERE state = 'failed';
CREATE INDEX tinystore_jobs_group ON tinystore_jobs (queue, grp, id) WHERE grp IS NOT NULL;

-- The jobs kept when this file took the triggers (one scan, once).
INSERT INTO tinystore_queue_counts (queue, queued, running, done, failed, repeating)
SELECT queue, count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
       count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'), count(repeat)
FROM tinystore_jobs GROUP BY queue;
