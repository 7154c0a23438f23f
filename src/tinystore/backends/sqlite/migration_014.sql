-- 014: each attempt's start, end and error, for an operator's page (show, the dashboard): the last 20
-- attempts of a job (KEPT_ATTEMPTS in _engine/leases.py), written as the attempt settles, and removed
-- with the job.
CREATE TABLE tinystore_attempts (
    job     INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    began   REAL,
    ended   REAL NOT NULL,
    error   TEXT,
    PRIMARY KEY (job, attempt)
) WITHOUT ROWID;
