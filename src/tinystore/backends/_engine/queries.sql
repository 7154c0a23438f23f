-- The statements whose text is the same on every backend, each under a name with a line of description.
-- Written as SQLite spells them: placeholders ? and :name, tables tinystore_X. PostgreSQL reads them
-- with its own placeholders, and its tables X in the store's schema (statements.pyformat).
-- A statement that differs on a backend (a list as a parameter, a boolean column, the bytes of a
-- damaged row) is in that backend's queries.sql, with a comment why.

-- name: queue_options
-- The options a queue keeps in the store.
SELECT options FROM tinystore_queues WHERE name = ?;

-- name: queue_save
-- Keep a queue's options.
INSERT INTO tinystore_queues (name, options) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET options = excluded.options;

-- name: queue_names
-- Every queue the store knows.
SELECT name, options FROM tinystore_queues ORDER BY name;

-- name: job_declare
-- A schedule's job takes its newest declaration's payload and rule (and time, where its rule changed).
UPDATE tinystore_jobs SET payload = :payload, repeat = :repeat, at = :at WHERE seq = :seq;

-- name: steps_delete
-- The steps of a job that is done: a later attempt will never ask for them.
DELETE FROM tinystore_steps WHERE job = ?;

-- name: attempt_record
-- An attempt that settled: when it began and ended, and its error (NULL where it did not fail). A snooze
-- gives its attempt back, so the next claim's attempt has its number: that one's record replaces it.
INSERT INTO tinystore_attempts (job, attempt, began, ended, error) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (job, attempt) DO UPDATE SET began = excluded.began, ended = excluded.ended, error = excluded.error;

-- name: attempts_lost_owner
-- The attempts whose leases a dead process held in a queue, ended now with an error saying so (when
-- they began is not known). "WHERE true": SQLite's parser needs it before ON CONFLICT after a SELECT.
INSERT INTO tinystore_attempts (job, attempt, began, ended, error)
SELECT job, attempt, CAST(NULL AS REAL), :now, :error FROM tinystore_leases WHERE owner = :owner AND queue = :queue AND true
ON CONFLICT (job, attempt) DO UPDATE SET began = excluded.began, ended = excluded.ended, error = excluded.error;

-- name: attempts_trim
-- A job keeps the records of its last attempts only (KEPT_ATTEMPTS): those at or below a number leave.
DELETE FROM tinystore_attempts WHERE job = ? AND attempt <= ?;

-- name: attempts_of_job
-- The kept attempts of a job, first to last.
SELECT attempt, began, ended, error FROM tinystore_attempts WHERE job = ? ORDER BY attempt;

-- name: ahead
-- Due jobs that start before a job of priority :priority at (at, seq): every one of a higher priority,
-- and the earlier ones of its own. Those without a group from their index by priority, a range for each
-- priority present from the highest down to :priority (a probe finds each), so that the jobs of those
-- priorities scheduled for later are not read; then those of any group, from the groups' index.
-- The sum is cast: PostgreSQL's sum of counts is a numeric.
SELECT (WITH RECURSIVE present(p) AS (
            SELECT (SELECT priority FROM tinystore_jobs WHERE queue = :queue AND state = 'queued' AND grp IS NULL
                    ORDER BY priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT priority FROM tinystore_jobs
                    WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND priority < present.p
                    ORDER BY priority DESC LIMIT 1)
            FROM present WHERE present.p > :priority)
        SELECT coalesce(CAST(sum((SELECT count(*) FROM tinystore_jobs
                                  WHERE queue = :queue AND state = 'queued' AND grp IS NULL
                                    AND priority = present.p AND at <= :now
                                    AND (present.p > :priority OR (at, seq) < (:at, :seq)))) AS BIGINT), 0)
        FROM present WHERE present.p >= :priority)
     + (SELECT count(*) FROM tinystore_jobs
        WHERE queue = :queue AND state = 'queued' AND grp IS NOT NULL AND at <= :now
          AND (priority > :priority OR (priority = :priority AND (at, seq) < (:at, :seq))));

-- name: priority_below
-- The highest priority below :above among the queued jobs without a group, due or not (NULL where
-- none): one probe of their index by priority. Not max(), which PostgreSQL reads as a scan of them all.
SELECT (SELECT priority FROM tinystore_jobs
        WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND priority < :above
        ORDER BY priority DESC LIMIT 1);

-- name: due_ungrouped
-- The first due jobs without a group of one priority, in start order: the jobs of that priority
-- scheduled for later come after them in the index, and are not read.
SELECT priority, at, seq, NULL FROM tinystore_jobs
WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND priority = :priority AND at <= :now
ORDER BY at, seq LIMIT :want;

-- name: due_in_group
-- The first due jobs of one group of one priority, in start order, from the group's index by priority:
-- the group's jobs of that priority scheduled for later come after them, and are not read.
SELECT priority, at, seq, grp FROM tinystore_jobs
WHERE queue = :queue AND grp = :grp AND state = 'queued' AND priority = :priority AND at <= :now
ORDER BY at, seq LIMIT :want;

-- name: group_priority_below
-- The highest priority below :above among a group's queued jobs, due or not (NULL where none).
SELECT (SELECT priority FROM tinystore_jobs
        WHERE queue = :queue AND grp = :grp AND state = 'queued' AND priority < :above
        ORDER BY priority DESC LIMIT 1);

-- name: head_of_group
-- The first queued job of a group, due or not: the earliest of the first jobs of each priority present in
-- the group's index by priority (a probe finds each priority, two more read its first job's at and seq).
WITH RECURSIVE present(p) AS (
    SELECT (SELECT priority FROM tinystore_jobs WHERE queue = :queue AND grp = :grp AND state = 'queued'
            ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT priority FROM tinystore_jobs
            WHERE queue = :queue AND grp = :grp AND state = 'queued' AND priority < present.p
            ORDER BY priority DESC LIMIT 1)
    FROM present WHERE present.p IS NOT NULL)
SELECT (SELECT at FROM tinystore_jobs
        WHERE queue = :queue AND grp = :grp AND state = 'queued' AND priority = present.p
        ORDER BY at, seq LIMIT 1) AS at,
       (SELECT seq FROM tinystore_jobs
        WHERE queue = :queue AND grp = :grp AND state = 'queued' AND priority = present.p
        ORDER BY at, seq LIMIT 1) AS seq
FROM present WHERE present.p IS NOT NULL
ORDER BY at, seq LIMIT 1;

-- name: lease_count
-- Live leases of a queue.
SELECT count(*) FROM tinystore_leases WHERE queue = ?;

-- name: lease_end
-- End the lease of one attempt; no row when that attempt no longer holds it (JOB-05).
DELETE FROM tinystore_leases WHERE job = ? AND attempt = ? RETURNING job;

-- name: lease_held
-- Whether an attempt still holds its lease.
SELECT 1 FROM tinystore_leases WHERE job = ? AND attempt = ?;

-- name: lease_of_job
-- The lease a job is under, and its holder.
SELECT l.attempt, l.expires, p.pid, p.host
FROM tinystore_leases l LEFT JOIN tinystore_processes p ON p.id = l.owner
WHERE l.job = ?;

-- name: lease_renew
-- Renew the leases a process holds in a queue; the (job, attempt) of each lease it still holds (one
-- statement: a renewal is one round trip to a server).
UPDATE tinystore_leases SET expires = ? WHERE owner = ? AND queue = ? RETURNING job, attempt;

-- name: leases_expired
-- Leases of a queue that ran out.
SELECT job, attempt FROM tinystore_leases WHERE queue = ? AND expires <= ? LIMIT 500;

-- name: job_requeue
-- An attempt ended: the job waits for `at` again; `uncount` 1 gives the attempt back, `reset` true sets
-- the attempts to zero (a repeating job waiting for its next time).
UPDATE tinystore_jobs SET state = 'queued', at = :at, error = :error, progress = NULL, result = :result,
    attempt = CASE WHEN :reset THEN 0 ELSE attempt - :uncount END
WHERE seq = :seq;

-- name: job_fail
-- The job failed for good; it is kept with its error until `expires`.
UPDATE tinystore_jobs SET state = 'failed', error = ?, expires = ?, progress = NULL WHERE seq = ?;

-- name: job_done
-- The job is done; it is kept until `expires` so that its id adds nothing.
UPDATE tinystore_jobs SET state = 'done', error = NULL, expires = ?, progress = NULL, result = ?
WHERE seq = ?;

-- name: job_retry_failed
-- A failed job runs again, its attempts from zero.
UPDATE tinystore_jobs SET state = 'queued', attempt = 0, at = ?, expires = NULL
WHERE seq = ? AND state = 'failed';

-- name: job_progress
-- The progress a running attempt reports.
UPDATE tinystore_jobs SET progress = ? WHERE seq = ? AND state = 'running';

-- name: step_get
-- A kept step answer.
SELECT answer FROM tinystore_steps WHERE job = ? AND name = ?;

-- name: step_keep
-- Keep a step's answer.
INSERT INTO tinystore_steps (job, name, attempt, answer) VALUES (?, ?, ?, ?)
ON CONFLICT (job, name) DO NOTHING;

-- name: step_insert
-- Keep a step's answer within run.transaction: a second keep of the same step fails, and rolls back.
INSERT INTO tinystore_steps (job, name, attempt, answer) VALUES (?, ?, ?, ?);

-- name: steps_of_job
-- Every step kept under a job.
SELECT name, attempt, answer FROM tinystore_steps WHERE job = ? ORDER BY name;

-- name: group_add
-- A job joins its group: the group's head is its first queued job, its priority the highest of them
-- (the new job's alone where nothing else is queued).
INSERT INTO tinystore_groups AS g (queue, grp, head_at, head_seq, top_priority)
VALUES (:queue, :grp, :at, :seq, :priority)
ON CONFLICT (queue, grp) DO UPDATE SET
    head_at = CASE WHEN g.head_at IS NULL OR (excluded.head_at, excluded.head_seq) < (g.head_at, g.head_seq)
                   THEN excluded.head_at ELSE g.head_at END,
    head_seq = CASE WHEN g.head_at IS NULL OR (excluded.head_at, excluded.head_seq) < (g.head_at, g.head_seq)
                    THEN excluded.head_seq ELSE g.head_seq END,
    top_priority = CASE WHEN g.head_at IS NULL OR excluded.top_priority > g.top_priority
                        THEN excluded.top_priority ELSE g.top_priority END
WHERE g.head_at IS NULL OR (excluded.head_at, excluded.head_seq) < (g.head_at, g.head_seq)
   OR excluded.top_priority > g.top_priority;

-- name: group_get
-- One group.
SELECT running, head_at, head_seq, ready, wake_at FROM tinystore_groups WHERE queue = ? AND grp = ?;

-- name: group_set
-- A group's counts and head after a claim or a settlement; its priority read again from its jobs.
UPDATE tinystore_groups SET running = :running, head_at = :head_at, head_seq = :head_seq,
    ready = :ready, wake_at = :wake_at,
    top_priority = coalesce((SELECT priority FROM tinystore_jobs
                             WHERE queue = :queue AND grp = :grp AND state = 'queued'
                             ORDER BY priority DESC LIMIT 1), 0)
WHERE queue = :queue AND grp = :grp;

-- name: group_drop
-- A group with nothing queued and nothing running.
DELETE FROM tinystore_groups WHERE queue = ? AND grp = ?;

-- name: group_ensure
-- A group's row, created empty when missing.
INSERT INTO tinystore_groups (queue, grp) VALUES (?, ?) ON CONFLICT (queue, grp) DO NOTHING;

-- name: group_running
-- Live leases of one group, counted from the leases themselves.
SELECT count(*) FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.queue = ? AND j.grp = ?;

-- name: groups_woken
-- Rate-limited groups whose window has room again.
SELECT grp FROM tinystore_groups WHERE queue = ? AND wake_at <= ?;

-- name: groups_refresh
-- Recompute whether each group of a queue has room, after its limits changed; a group set aside by
-- its rate is woken at the next claim (wake_at 0), which counts its window under the new rate.
UPDATE tinystore_groups SET ready = (running < :limit AND wake_at IS NULL),
    wake_at = CASE WHEN wake_at IS NULL THEN NULL ELSE 0 END
WHERE queue = :queue;

-- name: starts_in_window
-- Starts of a queue in its sliding window, and the oldest of them.
SELECT count(*), min(t) FROM tinystore_starts WHERE queue = ? AND t > ?;

-- name: group_starts_in_window
-- Starts of one group in its sliding window, and the oldest of them.
SELECT count(*), min(t) FROM tinystore_starts WHERE queue = ? AND grp = ? AND t > ?;

-- name: starts_clamp
-- Starts counted later than now (by a clock that read later: set back since, or another process's
-- running ahead) count as made now: never earlier than they were, never holding a window longer
-- than its period. Read from the (queue, t) index: with none, it writes nothing.
UPDATE tinystore_starts SET t = :now WHERE queue = :queue AND t > :now;

-- name: groups_wake_clamp
-- Groups set aside until later than now plus their window (by a clock that read later) are woken now:
-- the next claim counts their window again.
UPDATE tinystore_groups SET wake_at = :now WHERE queue = :queue AND wake_at > :now + :window;

-- name: starts_prune
-- Starts older than every window of a queue.
DELETE FROM tinystore_starts WHERE queue = ? AND t <= ?;

-- name: cancelled_mark
-- Remember that a job was cancelled, for its watchers.
INSERT INTO tinystore_cancelled (job, at) VALUES (?, ?)
ON CONFLICT (job) DO UPDATE SET at = excluded.at;

-- name: cancelled_get
-- Whether a job that is gone was cancelled.
SELECT 1 FROM tinystore_cancelled WHERE job = ?;

-- name: cancelled_prune
-- Cancellation marks no watcher needs any more.
DELETE FROM tinystore_cancelled WHERE at <= ?;

-- name: counts_prune
-- Per-minute counts older than a day.
DELETE FROM tinystore_counts WHERE minute <= ?;

-- name: process_delete
-- A process that ended.
DELETE FROM tinystore_processes WHERE id = ?;

-- name: owner_groups
-- The groups of the jobs a process holds in a queue.
SELECT DISTINCT j.grp FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.owner = ? AND l.queue = ? AND j.grp IS NOT NULL;

-- name: owner_lost
-- A dead process's attempts end, as _settle.decide_lost decides for each (its parameters come from
-- _settle.lost_in_bulk): a job whose attempt reached :attempts fails for good, the others wait again;
-- every attempt stays counted. Returns each job's new state, and its batch.
-- Repeating jobs are not among them: each is decided apart, as its next time is its rule's.
UPDATE tinystore_jobs SET
    state = CASE WHEN attempt >= :attempts THEN 'failed' ELSE 'queued' END,
    at = CASE WHEN attempt >= :attempts THEN at ELSE :again_at END,
    expires = CASE WHEN attempt >= :attempts THEN :failed_expires END,
    error = CASE WHEN attempt >= :attempts THEN :failed_error ELSE :again_error END,
    progress = NULL
WHERE seq IN (SELECT job FROM tinystore_leases WHERE owner = :owner AND queue = :queue)
  AND state = 'running' AND repeat IS NULL
RETURNING state, batch;

-- name: owner_repeating
-- The attempts of repeating jobs a dead process held in a queue.
SELECT l.job, l.attempt FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.owner = ? AND l.queue = ? AND j.repeat IS NOT NULL;

-- name: owner_leases_end
-- The leases a process holds in a queue end.
DELETE FROM tinystore_leases WHERE owner = ? AND queue = ?;

-- name: lease_drop
-- End a job's lease, whatever its attempt (the job is cancelled).
DELETE FROM tinystore_leases WHERE job = ?;

-- name: watched_insert
-- A process begins to watch a job: from its commit on, the job's changes are logged.
INSERT INTO tinystore_watched (job, owner) VALUES (?, ?) ON CONFLICT DO NOTHING;

-- name: watched_delete
-- A process no longer watches a job.
DELETE FROM tinystore_watched WHERE job = ? AND owner = ?;

-- name: watched_delete_owner
-- A process that closed or died watches nothing.
DELETE FROM tinystore_watched WHERE owner = ?;

-- name: changes_prune_job
-- The changes of a job nobody watches any more.
DELETE FROM tinystore_changes WHERE job = :job AND NOT EXISTS (SELECT 1 FROM tinystore_watched WHERE job = :job);

-- name: batch_insert
-- A new batch, open, with nothing in it yet.
INSERT INTO tinystore_batches (id, then_queue, then_payload, then_grp, then_priority, created_at)
VALUES (?, ?, ?, ?, ?, ?);

-- name: batch_join
-- Before jobs join a batch: whether it is kept, and closed; its row is locked (on PostgreSQL) until the
-- transaction ends, so that a close waits for the jobs joining it and a join after a close sees it.
UPDATE tinystore_batches SET total = total WHERE id = ? RETURNING closed_at;

-- name: batch_grow
-- Jobs joined a batch.
UPDATE tinystore_batches SET total = total + ? WHERE id = ?;

-- name: batch_ended
-- Jobs of a batch ended: its counts, and what adding its then job needs. Its row is locked until the
-- transaction ends: another transaction ending jobs of it waits, and then reads these counts.
UPDATE tinystore_batches SET done = done + :done, failed = failed + :failed, cancelled = cancelled + :cancelled
WHERE id = :id
RETURNING closed_at, total, done, failed, cancelled, then_seq, then_queue, then_payload, then_grp, then_priority;

-- name: batch_close
-- No more jobs join a batch (closing it again changes nothing): its counts, as batch_ended returns them.
UPDATE tinystore_batches SET closed_at = coalesce(closed_at, :now) WHERE id = :id
RETURNING closed_at, total, done, failed, cancelled, then_seq, then_queue, then_payload, then_grp, then_priority;

-- name: batch_then
-- A batch's then job was added.
UPDATE tinystore_batches SET then_seq = ? WHERE id = ?;

-- name: batch_unfail
-- A failed job of a batch runs again: it is no longer ended, where the batch's then job was not added.
UPDATE tinystore_batches SET failed = failed - 1 WHERE id = ? AND then_seq IS NULL AND failed > 0 RETURNING id;

-- name: job_batch
-- The batch a job belongs to, or NULL.
SELECT batch FROM tinystore_jobs WHERE seq = ?;

-- name: job_leave_batch
-- A job runs again outside the batch whose then job was added already.
UPDATE tinystore_jobs SET batch = NULL WHERE seq = ?;

-- name: batch_get
-- A batch: its counts, its then job (id and time it leaves) where added, and its jobs not ended, by state.
SELECT b.id, b.then_queue, b.closed_at, b.total, b.done, b.failed, b.cancelled, t.id, t.expires,
    (SELECT count(*) FROM tinystore_jobs WHERE batch = b.id AND state = 'queued' AND at > :now),
    (SELECT count(*) FROM tinystore_jobs WHERE batch = b.id AND state = 'queued' AND at <= :now),
    (SELECT count(*) FROM tinystore_jobs WHERE batch = b.id AND state = 'running')
FROM tinystore_batches b LEFT JOIN tinystore_jobs t ON t.seq = b.then_seq
WHERE b.id = :id;

-- name: jobs_last_seq
-- The highest seq of the store's jobs (seqs only grow): a walk over many jobs acts on none above it.
SELECT coalesce(max(seq), 0) FROM tinystore_jobs;
