-- 003: a watcher sees every change of the job it watches (JOB-13), not only
-- what the job is when it looks. While a job is watched, triggers log each
-- change of its state, time, attempt, error and progress; a job nobody
-- watches costs the claim and the settlement one index probe of an empty
-- table, and writes nothing.

-- The jobs watched now, by the process (owner) that watches them.
CREATE TABLE tinystore_watched (
    job   INTEGER NOT NULL,
    owner INTEGER NOT NULL,
    PRIMARY KEY (job, owner)
) WITHOUT ROWID;

-- Each change of a watched job, in commit order; state is NULL where the job
-- left the queue (done and removed at once, or cancelled). A watcher reads a
-- job's changes after the last one of that job it saw, and a watched job's
-- changes are kept while it is watched: a new id, one above the largest, is
-- always above that cursor (no AUTOINCREMENT, which would add SQLite's
-- sqlite_sequence table beside the application's).
CREATE TABLE tinystore_changes (
    id       INTEGER PRIMARY KEY,
    job      INTEGER NOT NULL,
    state    TEXT,
    at       REAL NOT NULL,
    attempt  INTEGER NOT NULL,
    error    TEXT,
    progress TEXT
);
CREATE INDEX tinystore_changes_job ON tinystore_changes (job, id);

CREATE TRIGGER tinystore_jobs_changed
AFTER UPDATE OF state, at, attempt, error, progress ON tinystore_jobs
WHEN EXISTS (SELECT 1 FROM tinystore_watched WHERE job = NEW.seq)
BEGIN
    INSERT INTO tinystore_changes (job, state, at, attempt, error, progress)
    VALUES (NEW.seq, NEW.state, NEW.at, NEW.attempt, NEW.error, NEW.progress);
END;

CREATE TRIGGER tinystore_jobs_left
AFTER DELETE ON tinystore_jobs
WHEN EXISTS (SELECT 1 FROM tinystore_watched WHERE job = OLD.seq)
BEGIN
    INSERT INTO tinystore_changes (job, state, at, attempt, error, progress)
    VALUES (OLD.seq, NULL, OLD.at, OLD.attempt, OLD.error, NULL);
END;
