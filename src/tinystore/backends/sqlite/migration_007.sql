-- 007: jobs per queue and state, kept as rows come, change state and leave, so that stats() and an
-- operator's page read a few rows instead of counting every job kept. Triggers keep them, so that every
-- writer of the file does (an application's own connection, a process of an earlier version). Queued
-- jobs are split into scheduled and waiting when read (backends/_counts.py).
CREATE TABLE tinystore_state_counts (
    queue     TEXT NOT NULL,
    state     TEXT NOT NULL,
    jobs      INTEGER NOT NULL,
    repeating INTEGER NOT NULL,  -- how many of them repeat
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

CREATE TRIGGER tinystore_jobs_counted_in
AFTER INSERT ON tinystore_jobs
BEGIN
    INSERT INTO tinystore_state_counts (queue, state, jobs, repeating)
    VALUES (NEW.queue, NEW.state, 1, NEW.repeat IS NOT NULL)
    ON CONFLICT (queue, state) DO UPDATE SET jobs = jobs + 1, repeating = repeating + excluded.repeating;
END;

CREATE TRIGGER tinystore_jobs_counted_out
AFTER DELETE ON tinystore_jobs
BEGIN
    UPDATE tinystore_state_counts SET jobs = jobs - 1, repeating = repeating - (OLD.repeat IS NOT NULL)
    WHERE queue = OLD.queue AND state = OLD.state;
END;

CREATE TRIGGER tinystore_jobs_counted_moved
AFTER UPDATE OF state, repeat ON tinystore_jobs
WHEN OLD.state IS NOT NEW.state OR (OLD.repeat IS NULL) IS NOT (NEW.repeat IS NULL)
BEGIN
    UPDATE tinystore_state_counts SET jobs = jobs - 1, repeating = repeating - (OLD.repeat IS NOT NULL)
    WHERE queue = OLD.queue AND state = OLD.state;
    INSERT INTO tinystore_state_counts (queue, state, jobs, repeating)
    VALUES (NEW.queue, NEW.state, 1, NEW.repeat IS NOT NULL)
    ON CONFLICT (queue, state) DO UPDATE SET jobs = jobs + 1, repeating = repeating + excluded.repeating;
END;

-- The jobs kept when this file took the triggers (one scan, once).
INSERT INTO tinystore_state_counts (queue, state, jobs, repeating)
SELECT queue, state, count(*), count(repeat) FROM tinystore_jobs GROUP BY queue, state;
