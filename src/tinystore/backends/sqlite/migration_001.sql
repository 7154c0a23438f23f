-- 001: the tables of a job's life. Every table is tinystore_*, beside the application's.

-- One row per queue: its options as JSON, so every process enforces the same limits.
CREATE TABLE tinystore_queues (
    name    TEXT PRIMARY KEY,
    options TEXT NOT NULL
) WITHOUT ROWID;

-- The last job seq handed out: seqs are never reused, since leases, steps
-- and watchers name a job by its seq.
CREATE TABLE tinystore_sequence (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
);
INSERT INTO tinystore_sequence (id, last) VALUES (1, 0);

-- One row per job while the queue keeps it. seq is the order of adding.
-- state: queued (scheduled or waiting, as `at` says), running, done, failed.
CREATE TABLE tinystore_jobs (
    seq      INTEGER PRIMARY KEY,
    queue    TEXT NOT NULL,
    id       TEXT NOT NULL,
    payload  TEXT NOT NULL,
    grp      TEXT,
    state    TEXT NOT NULL,
    at       REAL NOT NULL,
    attempt  INTEGER NOT NULL DEFAULT 0,
    error    TEXT,
    progress TEXT,
    expires  REAL,
    UNIQUE (queue, id)
);
-- Due jobs without a group, in start order: a claim reads only what it takes.
CREATE INDEX tinystore_jobs_due ON tinystore_jobs (queue, at, seq)
    WHERE state = 'queued' AND grp IS NULL;
-- Due jobs of each group, in start order.
CREATE INDEX tinystore_jobs_group_due ON tinystore_jobs (queue, grp, at, seq)
    WHERE state = 'queued' AND grp IS NOT NULL;
-- Done and failed jobs by the time they leave.
CREATE INDEX tinystore_jobs_expires ON tinystore_jobs (expires) WHERE expires IS NOT NULL;

-- A lease: "process `owner` holds attempt `attempt` of this job until `expires`".
-- started = 0 while the job is claimed but its handler has not begun.
CREATE TABLE tinystore_leases (
    job     INTEGER PRIMARY KEY,
    attempt INTEGER NOT NULL,
    queue   TEXT NOT NULL,
    owner   INTEGER NOT NULL,
    expires REAL NOT NULL
);
CREATE INDEX tinystore_leases_queue ON tinystore_leases (queue, expires);
CREATE INDEX tinystore_leases_owner ON tinystore_leases (owner);

-- A step's kept answer, under its job.
CREATE TABLE tinystore_steps (
    job     INTEGER NOT NULL,
    name    TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    answer  TEXT NOT NULL,
    PRIMARY KEY (job, name)
) WITHOUT ROWID;

-- Every process that has the store open. Its liveness is a lock on byte `id`
-- of the store's lock file, which the kernel drops when the process dies.
CREATE TABLE tinystore_processes (
    id      INTEGER PRIMARY KEY,
    pid     INTEGER NOT NULL,
    host    TEXT NOT NULL,
    started REAL NOT NULL
);

-- One row per group that has queued or running jobs. The claim reads groups
-- with room in the order of their first due job (head), so jobs waiting
-- behind a full group are never scanned.
CREATE TABLE tinystore_groups (
    queue    TEXT NOT NULL,
    grp      TEXT NOT NULL,
    running  INTEGER NOT NULL DEFAULT 0,
    head_at  REAL,
    head_seq INTEGER,
    ready    INTEGER NOT NULL DEFAULT 1,  -- 0 while full, or while its rate window is used up
    wake_at  REAL,                        -- when a rate-limited group has room again
    PRIMARY KEY (queue, grp)
) WITHOUT ROWID;
CREATE INDEX tinystore_groups_ready ON tinystore_groups (queue, head_at, head_seq)
    WHERE ready = 1 AND head_at IS NOT NULL;
CREATE INDEX tinystore_groups_wake ON tinystore_groups (queue, wake_at) WHERE wake_at IS NOT NULL;

-- Job starts, written only for queues with a rate: the sliding windows count them.
CREATE TABLE tinystore_starts (
    queue TEXT NOT NULL,
    grp   TEXT,
    t     REAL NOT NULL
);
CREATE INDEX tinystore_starts_queue ON tinystore_starts (queue, t);
CREATE INDEX tinystore_starts_group ON tinystore_starts (queue, grp, t) WHERE grp IS NOT NULL;

-- Jobs cancelled lately, so that a watcher of a job that is gone can tell
-- cancelled from done.
CREATE TABLE tinystore_cancelled (
    job INTEGER PRIMARY KEY,
    at  REAL NOT NULL
);

-- Runs and outcomes per queue and minute, for `tinystore status`.
CREATE TABLE tinystore_counts (
    queue   TEXT NOT NULL,
    minute  INTEGER NOT NULL,
    started INTEGER NOT NULL DEFAULT 0,
    done    INTEGER NOT NULL DEFAULT 0,
    failed  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute)
) WITHOUT ROWID;
