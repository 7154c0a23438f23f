-- The statements the SQLite backend runs whose text is its own; the others are the engine's
-- (backends/_engine/queries.sql). Each is here for one of these reasons, said where it is not plain:
-- - a list is passed as one JSON array read with json_each (PostgreSQL: an array), so each statement is
--   prepared once whatever the size of the batch; rows of a batch as one JSON array of arrays (:rows);
-- - a job's id, payload, error and progress are read as the bytes in the file (CAST AS BLOB) and decoded
--   by tinystore: a row damaged into text that is not UTF-8 fails that job, not every read of its queue;
-- - a group's ready flag is an integer (PostgreSQL: a boolean), compared with 1 as its partial index is;
-- - seqs, notices, processes and pages by index are SQLite's own.

-- name: seq_next
-- The seq of the next job the writer adds (it holds the write lock): above every job kept and above
-- the floor, which jobs leaving raise.
SELECT max(coalesce((SELECT max(seq) FROM tinystore_jobs), 0), (SELECT floor FROM tinystore_sequence WHERE id = 1)) + 1;

-- name: seqs_reserve
-- Reserve seqs for jobs added in an application's transaction, which may not hold the write lock yet:
-- a write, so the lock is taken before the seqs are read; returns the last seq reserved.
UPDATE tinystore_sequence SET floor = max(floor, coalesce((SELECT max(seq) FROM tinystore_jobs), 0)) + ?
WHERE id = 1
RETURNING floor;

-- name: sequence_floor
-- Jobs up to seq :seq left: where no job above it is kept, the next seqs must still start above it.
-- (Where one is kept, its own seq holds them above, and its leaving will raise the floor.)
UPDATE tinystore_sequence SET floor = :seq
WHERE id = 1 AND floor < :seq AND NOT EXISTS (SELECT 1 FROM tinystore_jobs WHERE seq > :seq);

-- name: job_insert
-- Add a job under a reserved seq, unless its id names one already (then nothing changes).
INSERT INTO tinystore_jobs (seq, queue, id, payload, grp, state, at, repeat, priority, batch)
VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)
ON CONFLICT (queue, id) DO NOTHING;

-- name: job_by_id
-- A job by its id.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs WHERE queue = ? AND id = ?;

-- name: job_by_seq
-- A job by its seq.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs WHERE seq = ?;

-- name: jobs_by_seqs
-- Several jobs by their seqs (a JSON array).
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?));

-- name: ahead_many
-- For each of several waiting jobs of a queue (a JSON array of seqs), the due jobs that start
-- before it: one pass over the due jobs up to the last of them in start order (of priority :priority
-- at (:at, :seq)), for any number of jobs. Those without a group are read as ahead reads them (a range
-- per priority present down to :priority), those of a group from the groups' index.
SELECT seq, ahead FROM (
    SELECT seq, row_number() OVER (ORDER BY priority DESC, at, seq) - 1 AS ahead FROM (
        WITH RECURSIVE present(p) AS (
            SELECT max(priority) FROM tinystore_jobs WHERE queue = :queue AND state = 'queued' AND grp IS NULL
            UNION ALL
            SELECT (SELECT max(priority) FROM tinystore_jobs
                    WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND priority < present.p)
            FROM present WHERE present.p > :priority)
        SELECT j.priority, j.at, j.seq FROM present JOIN tinystore_jobs j
            ON j.queue = :queue AND j.state = 'queued' AND j.grp IS NULL AND j.priority = present.p AND j.at <= :now
           AND (present.p > :priority OR (j.at, j.seq) <= (:at, :seq))
        WHERE present.p >= :priority
        UNION ALL
        SELECT priority, at, seq FROM tinystore_jobs
        WHERE queue = :queue AND state = 'queued' AND grp IS NOT NULL AND at <= :now
          AND (priority > :priority OR (priority = :priority AND (at, seq) <= (:at, :seq)))
    )
) WHERE seq IN (SELECT value FROM json_each(:seqs));

-- name: take
-- Claim jobs: running, with their attempt counted now (JOB-04). A job no longer queued is not taken.
-- Id and payload come as the bytes in the file, with whether SQLite reads the payload as JSON. A
-- repeating job keeps its last error until a run succeeds.
UPDATE tinystore_jobs SET state = 'running', attempt = attempt + 1, progress = NULL,
    error = CASE WHEN repeat IS NULL THEN NULL ELSE error END
WHERE seq IN (SELECT value FROM json_each(?)) AND state = 'queued'
RETURNING seq, CAST(id AS BLOB), CAST(payload AS BLOB), grp, at, attempt, json_valid(payload), repeat;

-- name: lease_insert
-- A lease per claimed job, naming its attempt.
INSERT INTO tinystore_leases (job, attempt, queue, owner, expires)
SELECT seq, attempt, queue, ?, ? FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?));

-- name: leases_end_many
-- End the leases of a batch of attempts, given as a JSON array of [job, attempt] (:rows);
-- returns the leases (job, attempt) that were still held (the others' attempts are stale, JOB-05), each
-- with its job's batch.
DELETE FROM tinystore_leases
WHERE job IN (SELECT value ->> 0 FROM json_each(:rows))
  AND (job, attempt) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:rows))
RETURNING job, attempt, (SELECT batch FROM tinystore_jobs WHERE seq = tinystore_leases.job);

-- name: jobs_delete_many
-- Jobs leave the queue (a JSON array of seqs).
DELETE FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?));

-- name: attempts_delete_many
-- The attempts kept of jobs that left the queue (a JSON array of seqs).
DELETE FROM tinystore_attempts WHERE job IN (SELECT value FROM json_each(?));

-- name: steps_delete_many
-- The steps of jobs that left the queue (a JSON array of seqs).
DELETE FROM tinystore_steps WHERE job IN (SELECT value FROM json_each(?));

-- name: lease_held_for_write
-- Whether an attempt still holds its lease, for a progress or a step it writes: the writer holds the
-- file's write lock, so nothing ends the lease before this transaction commits (PostgreSQL locks the row).
SELECT 1 FROM tinystore_leases WHERE job = ? AND attempt = ?;

-- name: groups_priority_below
-- The highest group priority (top_priority: its queued jobs' highest) below :above among the groups with
-- room and a head, due or not (NULL where none): one probe of their index by priority. Here ready is
-- compared with 1, as its partial index is.
SELECT (SELECT top_priority FROM tinystore_groups
        WHERE queue = :queue AND ready = 1 AND head_at IS NOT NULL AND top_priority < :above
        ORDER BY top_priority DESC LIMIT 1);

-- name: groups_ready
-- Groups of one priority with room whose first job is due, in the order of that job.
SELECT grp, running, top_priority FROM tinystore_groups
WHERE queue = :queue AND ready = 1 AND head_at IS NOT NULL AND top_priority = :top AND head_at <= :now
ORDER BY head_at, head_seq LIMIT :want;

-- name: groups_update
-- Groups a claim or a settlement touched (a JSON array of [grp, change in running]): running count,
-- head (first queued job: the earliest of each priority's first, as head_of_group reads it), priority
-- and room read again; materialized, so each group is found by its key.
WITH c AS MATERIALIZED (SELECT value ->> 0 AS grp, value ->> 1 AS change FROM json_each(:changes))
UPDATE tinystore_groups AS g
SET running = max(0, g.running + c.change),
    (head_at, head_seq) = (
        WITH RECURSIVE present(p) AS (
            SELECT (SELECT priority FROM tinystore_jobs WHERE queue = g.queue AND grp = g.grp AND state = 'queued'
                    ORDER BY priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT priority FROM tinystore_jobs
                    WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority < present.p
                    ORDER BY priority DESC LIMIT 1)
            FROM present WHERE present.p IS NOT NULL)
        SELECT (SELECT at FROM tinystore_jobs
                WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority = present.p
                ORDER BY at, seq LIMIT 1) AS at,
               (SELECT seq FROM tinystore_jobs
                WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority = present.p
                ORDER BY at, seq LIMIT 1) AS seq
        FROM present WHERE present.p IS NOT NULL
        ORDER BY at, seq LIMIT 1),
    top_priority = coalesce((SELECT priority FROM tinystore_jobs
                             WHERE queue = g.queue AND grp = g.grp AND state = 'queued'
                             ORDER BY priority DESC LIMIT 1), 0),
    ready = (max(0, g.running + c.change) < :limit AND g.wake_at IS NULL)
FROM c
WHERE g.queue = :queue AND g.grp = c.grp;

-- name: groups_drop_idle
-- Of these groups (a JSON array), those with nothing queued and nothing running.
DELETE FROM tinystore_groups
WHERE queue = ? AND grp IN (SELECT value FROM json_each(?)) AND running = 0 AND head_at IS NULL;

-- name: starts_insert
-- Record starts for the rate windows (a JSON array of groups, one per start; null for none).
INSERT INTO tinystore_starts (queue, grp, t) SELECT :queue, value, :t FROM json_each(:grps);

-- name: process_insert
-- Register this process, with the store file and the lock file it found (see _identity).
INSERT INTO tinystore_processes (pid, host, started, file_dev, file_ino, lock_dev, lock_ino, pid_ns)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id;

-- name: process_move
-- A registration takes another id: its byte in the lock file was held by a process that is not registered.
UPDATE tinystore_processes SET id = (SELECT max(id) + 1 FROM tinystore_processes) WHERE id = ? RETURNING id;

-- name: process_list
-- Every registered process.
SELECT id, pid, host, file_dev, file_ino, lock_dev, lock_ino, pid_ns FROM tinystore_processes;

-- name: process_relock
-- A registration holds its byte in another lock file: the one beside the store now.
UPDATE tinystore_processes SET lock_dev = ?, lock_ino = ? WHERE id = ?;

-- name: expired_jobs
-- Done and failed jobs past their time, a batch at a time.
SELECT seq FROM tinystore_jobs WHERE expires <= ? LIMIT ?;

-- name: check_take
-- Take the day's check for damage: the last one is a day old, or later than now (a clock set back).
UPDATE tinystore_checked SET at = :now WHERE id = 1 AND (at <= :now - :every OR at > :now) RETURNING at;

-- name: tables_of_tinystore
-- tinystore's own tables in the file, which holds the application's too.
SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'tinystore\_%' ESCAPE '\' ORDER BY name;

-- name: queue_counts
-- Jobs per queue and state as the triggers keep them (migration 007).
SELECT queue, queued, running, done, failed, repeating FROM tinystore_queue_counts;

-- name: expired_counts
-- Done and failed jobs past their time that maintenance has not removed yet: kept rows, no longer
-- counted. As many as maintenance is behind, read by the expires index.
SELECT queue, state, count(*), count(repeat) FROM tinystore_jobs WHERE expires <= :now
GROUP BY queue, state;

-- name: scheduled_counts
-- Per queue, its queued jobs due after now, counted over the due indexes by priority: per queue and
-- per group, a probe for each priority present and a seek into its jobs after now. What is scheduled,
-- never what waits.
SELECT queue, sum(n) FROM (
    SELECT q.name AS queue, (
        WITH RECURSIVE present(p) AS (
            SELECT max(priority) FROM tinystore_jobs WHERE queue = q.name AND state = 'queued' AND grp IS NULL
            UNION ALL
            SELECT (SELECT max(priority) FROM tinystore_jobs
                    WHERE queue = q.name AND state = 'queued' AND grp IS NULL AND priority < present.p)
            FROM present WHERE present.p IS NOT NULL)
        SELECT sum((SELECT count(*) FROM tinystore_jobs
                    WHERE queue = q.name AND state = 'queued' AND grp IS NULL AND priority = present.p
                      AND at > :now))
        FROM present) AS n
    FROM tinystore_queues q
    UNION ALL
    SELECT g.queue, (
        WITH RECURSIVE present(p) AS (
            SELECT max(priority) FROM tinystore_jobs WHERE queue = g.queue AND grp = g.grp AND state = 'queued'
            UNION ALL
            SELECT (SELECT max(priority) FROM tinystore_jobs
                    WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority < present.p)
            FROM present WHERE present.p IS NOT NULL)
        SELECT sum((SELECT count(*) FROM tinystore_jobs
                    WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority = present.p
                      AND at > :now))
        FROM present)
    FROM tinystore_groups g
) GROUP BY queue HAVING sum(n) > 0;

-- name: first_due
-- Per queue, the time of its first queued job: the first of each priority present in its due index by
-- priority, and in each of its groups' (a probe per priority, a seek per priority and group).
SELECT q.name,
       (WITH RECURSIVE present(p) AS (
            SELECT max(priority) FROM tinystore_jobs WHERE queue = q.name AND state = 'queued' AND grp IS NULL
            UNION ALL
            SELECT (SELECT max(priority) FROM tinystore_jobs
                    WHERE queue = q.name AND state = 'queued' AND grp IS NULL AND priority < present.p)
            FROM present WHERE present.p IS NOT NULL)
        SELECT min((SELECT min(at) FROM tinystore_jobs
                    WHERE queue = q.name AND state = 'queued' AND grp IS NULL AND priority = present.p))
        FROM present),
       (SELECT min((WITH RECURSIVE present(p) AS (
                        SELECT max(priority) FROM tinystore_jobs
                        WHERE queue = g.queue AND grp = g.grp AND state = 'queued'
                        UNION ALL
                        SELECT (SELECT max(priority) FROM tinystore_jobs
                                WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority < present.p)
                        FROM present WHERE present.p IS NOT NULL)
                    SELECT min((SELECT min(at) FROM tinystore_jobs
                                WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND priority = present.p))
                    FROM present))
        FROM tinystore_groups g WHERE g.queue = q.name)
FROM tinystore_queues q;

-- name: recent_counts
-- Runs and outcomes per queue since a minute.
SELECT queue, sum(started), sum(done), sum(failed) FROM tinystore_counts
WHERE minute >= ? GROUP BY queue;

-- name: jobs_page
-- A page of a queue's jobs in the order of their ids, after an id (which may have left meanwhile),
-- walking the queue's ids: as fast as the state asked for is common (_reads.page_of picks the
-- statements below where an index holds only the jobs asked for).
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs
WHERE queue = :queue AND id > :after
  AND (expires IS NULL OR expires > :now)
  AND (:stored IS NULL OR state = :stored) AND (:due IS NULL OR (at <= :now) = :due)
ORDER BY id LIMIT :limit;

-- name: jobs_page_failed
-- A page of a queue's failed jobs, by the index of failed jobs.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs INDEXED BY tinystore_jobs_failed
WHERE queue = :queue AND state = 'failed' AND id > :after
  AND (:grp IS NULL OR grp = :grp)
  AND (expires IS NULL OR expires > :now)
ORDER BY id LIMIT :limit;

-- name: jobs_page_running
-- A page of a queue's running jobs, from their leases (as many as run, however many are kept).
SELECT j.seq, j.queue, j.id, CAST(j.payload AS BLOB), j.grp, j.state, j.at, j.attempt, CAST(j.error AS BLOB),
       CAST(j.progress AS BLOB), j.expires, CAST(j.result AS BLOB), j.repeat, j.priority
FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.queue = :queue AND j.state = 'running' AND j.id > :after
  AND (:grp IS NULL OR j.grp = :grp)
ORDER BY j.id LIMIT :limit;

-- name: jobs_page_group
-- A page of one group's jobs, by the index of grouped jobs.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs INDEXED BY tinystore_jobs_group
WHERE queue = :queue AND grp = :grp AND id > :after
  AND (expires IS NULL OR expires > :now)
  AND (:stored IS NULL OR state = :stored) AND (:due IS NULL OR (at <= :now) = :due)
ORDER BY id LIMIT :limit;

-- name: owner_queues
-- The queues in which processes hold leases (a JSON array of their ids).
SELECT DISTINCT queue FROM tinystore_leases WHERE owner IN (SELECT value FROM json_each(?)) ORDER BY queue;

-- name: changes_prune
-- The changes of every job nobody watches (left by processes that died).
DELETE FROM tinystore_changes WHERE job NOT IN (SELECT job FROM tinystore_watched);

-- name: changes_since
-- The changes of several watched jobs, each after its own cursor (a JSON array of [seq, change id],
-- :rows), in commit order: each job's are read from the (job, id) index.
SELECT c.id, c.job, c.state, c.at, c.attempt, c.error, c.progress
FROM json_each(:rows) AS w JOIN tinystore_changes AS c ON c.job = w.value ->> 0 AND c.id > w.value ->> 1
ORDER BY c.id;

-- name: notice_insert
-- One notice of a commit: a queue given work (job NULL), or a job cancelled.
INSERT INTO tinystore_notices (owner, queue, job) VALUES (?, ?, ?);

-- name: notices_prune
-- Keep the last 4,096 notices: a process further behind than that hears "everything".
DELETE FROM tinystore_notices WHERE id <= (SELECT max(id) FROM tinystore_notices) - 4096;

-- name: notices_since
-- The notices after a cursor, in order, with the first id still kept (a gap means some were pruned).
SELECT id, owner, queue, job, (SELECT min(id) FROM tinystore_notices) FROM tinystore_notices
WHERE id > ? ORDER BY id;

-- name: notices_last
-- The last notice's id: where a process begins to hear.
SELECT coalesce(max(id), 0) FROM tinystore_notices;

-- name: next_times
-- When a claim that left places free should look again: the next lease to run out, the next job
-- without a group due, the next ready group's head due, the next rate-limited group's room
-- (wake_at IS NOT NULL: read from the wake index, not from every group of the queue).
-- The next job without a group and the next ready group's head are read from the indexes the claim
-- reads, by priority (a probe per priority present, then its first).
SELECT (SELECT min(expires) FROM tinystore_leases WHERE queue = :queue),
       (WITH RECURSIVE present(p) AS (
            SELECT max(priority) FROM tinystore_jobs WHERE queue = :queue AND state = 'queued' AND grp IS NULL
            UNION ALL
            SELECT (SELECT max(priority) FROM tinystore_jobs
                    WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND priority < present.p)
            FROM present WHERE present.p IS NOT NULL)
        SELECT min((SELECT min(at) FROM tinystore_jobs
                    WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND priority = present.p))
        FROM present),
       (WITH RECURSIVE tops(p) AS (
            SELECT max(top_priority) FROM tinystore_groups WHERE queue = :queue AND ready = 1 AND head_at IS NOT NULL
            UNION ALL
            SELECT (SELECT max(top_priority) FROM tinystore_groups
                    WHERE queue = :queue AND ready = 1 AND head_at IS NOT NULL AND top_priority < tops.p)
            FROM tops WHERE tops.p IS NOT NULL)
        SELECT min((SELECT min(head_at) FROM tinystore_groups
                    WHERE queue = :queue AND ready = 1 AND head_at IS NOT NULL AND top_priority = tops.p))
        FROM tops),
       (SELECT min(wake_at) FROM tinystore_groups WHERE queue = :queue AND wake_at IS NOT NULL);

-- name: count_add
-- Add to the per-minute counts of a queue (PostgreSQL keeps a row per session: its own).
INSERT INTO tinystore_counts AS c (queue, minute, started, done, failed) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue, minute) DO UPDATE SET started = c.started + excluded.started,
    done = c.done + excluded.done, failed = c.failed + excluded.failed;

-- name: jobs_batches
-- The batches of jobs (a JSON array of seqs) that belong to one.
SELECT seq, batch FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?)) AND batch IS NOT NULL;

-- name: batches_delete_then
-- The batches whose then jobs (a JSON array of seqs) leave.
DELETE FROM tinystore_batches WHERE then_seq IN (SELECT value FROM json_each(?));

-- name: jobs_lock
-- The jobs of a chunk of cancel_many or retry_many (a JSON array of seqs), read again before they are
-- acted on. The single writer holds the file's write lock: no row can change before the commit.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat, priority
FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq;

-- name: leases_drop_many
-- End the leases of jobs cancelled together, whatever their attempts (a JSON array of seqs).
DELETE FROM tinystore_leases WHERE job IN (SELECT value FROM json_each(?));

-- name: cancelled_mark_many
-- Remember that jobs were cancelled together (a JSON array of seqs), for their watchers.
INSERT INTO tinystore_cancelled (job, at) SELECT value, :at FROM json_each(:seqs) WHERE true
ON CONFLICT (job) DO UPDATE SET at = excluded.at;

-- name: jobs_retry_failed_many
-- Failed jobs run again together (a JSON array of seqs), their attempts from zero.
UPDATE tinystore_jobs SET state = 'queued', attempt = 0, at = :at, expires = NULL
WHERE seq IN (SELECT value FROM json_each(:seqs)) AND state = 'failed';

-- name: release_opened
-- The release that opens the store and the schema version it leaves (migration 013), at each open; written
-- only when either changed (opened_at: when this release first opened it), so that an open that changes
-- nothing writes nothing (an operator's refused command must leave the file as it was).
INSERT INTO tinystore_release (id, release, schema_version, opened_at)
VALUES (1, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (id) DO UPDATE SET release = excluded.release, schema_version = excluded.schema_version,
                               opened_at = excluded.opened_at
WHERE tinystore_release.release <> excluded.release OR tinystore_release.schema_version <> excluded.schema_version;
