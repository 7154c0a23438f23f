-- 005: notices. Each write transaction that gives a queue work (jobs added or requeued, room freed,
-- options changed) or cancels a job logs one row per queue and per cancelled job, so that another
-- process that sees the file change (PRAGMA data_version) reads what changed, instead of asking every
-- queue it serves. ``owner`` is the process that wrote it (its own notices it has told already); NULL
-- for an application's own connection. The writer keeps the last few thousand rows.
CREATE TABLE tinystore_notices (
    id INTEGER PRIMARY KEY,
    owner INTEGER,
    queue TEXT NOT NULL,
    job INTEGER  -- a cancelled job's seq; NULL for work
);
