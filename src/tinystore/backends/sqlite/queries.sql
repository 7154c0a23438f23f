-- Every statement the SQLite backend runs, each under a name with a line of description.
-- A list of seqs is passed as one JSON array and read with json_each, so each
-- statement is prepared once whatever the size of the batch.
-- A job's payload, error and progress are read as the bytes in the file (CAST AS BLOB) and decoded
-- by tinystore: a row damaged into text that is not UTF-8 fails that job, not every read of its queue.

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
INSERT INTO tinystore_jobs (seq, queue, id, payload, grp, state, at, repeat)
VALUES (?, ?, ?, ?, ?, 'queued', ?, ?)
ON CONFLICT (queue, id) DO NOTHING;

-- name: job_declare
-- A schedule's job takes its newest declaration's payload and rule (and time, where its rule changed).
UPDATE tinystore_jobs SET payload = :payload, repeat = :repeat, at = :at WHERE seq = :seq;

-- name: job_by_id
-- A job by its id.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat
FROM tinystore_jobs WHERE queue = ? AND id = ?;

-- name: job_by_seq
-- A job by its seq.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat
FROM tinystore_jobs WHERE seq = ?;

-- name: jobs_by_seqs
-- Several jobs by their seqs (a JSON array).
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat
FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?));

-- name: steps_delete
-- The steps of a job that is done: a later attempt will never ask for them.
DELETE FROM tinystore_steps WHERE job = ?;

-- name: ahead_ungrouped
-- Due jobs without a group that start before (at, seq).
SELECT count(*) FROM tinystore_jobs
WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND at <= :now AND (at, seq) < (:at, :seq);

-- name: ahead_grouped
-- Due jobs of any group that start before (at, seq).
SELECT count(*) FROM tinystore_jobs
WHERE queue = :queue AND state = 'queued' AND grp IS NOT NULL AND at <= :now AND (at, seq) < (:at, :seq);

-- name: ahead_many
-- For each of several waiting jobs of a queue (a JSON array of seqs), the due jobs that start
-- before it: one pass over the due jobs up to the last of them, (:at, :seq), for any number of jobs.
SELECT seq, ahead FROM (
    SELECT seq, row_number() OVER (ORDER BY at, seq) - 1 AS ahead FROM (
        SELECT at, seq FROM tinystore_jobs
        WHERE queue = :queue AND state = 'queued' AND grp IS NULL AND at <= :now AND (at, seq) <= (:at, :seq)
        UNION ALL
        SELECT at, seq FROM tinystore_jobs
        WHERE queue = :queue AND state = 'queued' AND grp IS NOT NULL AND at <= :now AND (at, seq) <= (:at, :seq)
    )
) WHERE seq IN (SELECT value FROM json_each(:seqs));

-- name: due_ungrouped
-- The first due jobs without a group, in start order.
SELECT at, seq, NULL FROM tinystore_jobs
WHERE queue = ? AND state = 'queued' AND grp IS NULL AND at <= ?
ORDER BY at, seq LIMIT ?;

-- name: due_in_group
-- The first due jobs of one group, in start order.
SELECT at, seq, grp FROM tinystore_jobs
WHERE queue = ? AND grp = ? AND state = 'queued' AND at <= ?
ORDER BY at, seq LIMIT ?;

-- name: head_of_group
-- The first queued job of a group, due or not.
SELECT at, seq FROM tinystore_jobs
WHERE queue = ? AND grp = ? AND state = 'queued'
ORDER BY at, seq LIMIT 1;

-- name: next_ungrouped
-- When the next job without a group is due.
SELECT at FROM tinystore_jobs
WHERE queue = ? AND state = 'queued' AND grp IS NULL
ORDER BY at, seq LIMIT 1;

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

-- name: lease_count
-- Live leases of a queue.
SELECT count(*) FROM tinystore_leases WHERE queue = ?;

-- name: lease_end
-- End the lease of one attempt; no row when that attempt no longer holds it (JOB-05).
DELETE FROM tinystore_leases WHERE job = ? AND attempt = ?;

-- name: leases_end_many
-- End the leases of a batch of attempts, given as a JSON array of [job, attempt];
-- returns the jobs whose attempt still held its lease (the others are stale, JOB-05).
DELETE FROM tinystore_leases
WHERE job IN (SELECT value ->> 0 FROM json_each(:tokens))
  AND (job, attempt) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:tokens))
RETURNING job;

-- name: jobs_delete_many
-- Jobs leave the queue (a JSON array of seqs).
DELETE FROM tinystore_jobs WHERE seq IN (SELECT value FROM json_each(?));

-- name: steps_delete_many
-- The steps of jobs that left the queue (a JSON array of seqs).
DELETE FROM tinystore_steps WHERE job IN (SELECT value FROM json_each(?));

-- name: lease_held
-- Whether an attempt still holds its lease.
SELECT 1 FROM tinystore_leases WHERE job = ? AND attempt = ?;

-- name: lease_of_job
-- The lease a job is under, and its holder.
SELECT l.attempt, l.expires, p.pid, p.host
FROM tinystore_leases l LEFT JOIN tinystore_processes p ON p.id = l.owner
WHERE l.job = ?;

-- name: lease_renew
-- Renew the leases a process holds in a queue.
UPDATE tinystore_leases SET expires = ? WHERE owner = ? AND queue = ?;

-- name: leases_expired
-- Leases of a queue that ran out.
SELECT job, attempt FROM tinystore_leases WHERE queue = ? AND expires <= ? LIMIT 500;

-- name: next_expiry
-- When the next lease of a queue runs out.
SELECT min(expires) FROM tinystore_leases WHERE queue = ?;

-- name: job_requeue
-- An attempt ended: the job waits for `at` again; `uncount` 1 gives the attempt back, `reset` 1 sets
-- the attempts to zero (a repeating job waiting for its next time).
UPDATE tinystore_jobs SET state = 'queued', at = :at, error = :error, progress = NULL, result = :result,
    attempt = CASE WHEN :reset THEN 0 ELSE attempt - :uncount END
WHERE seq = :seq;

-- name: job_fail
-- The job failed for good; it is kept with its error until `expires`.
UPDATE tinystore_jobs SET state = 'failed', error = ?, expires = ?, progress = NULL WHERE seq = ?;

-- name: job_done
-- The job is done; it is kept until `expires` so that its id adds nothing.
UPDATE tinystore_jobs SET state = 'done', error = NULL, expires = ?, progress = NULL, result = ? WHERE seq = ?;

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
-- A job joins its group: the group's head is its first queued job.
INSERT INTO tinystore_groups (queue, grp, head_at, head_seq) VALUES (:queue, :grp, :at, :seq)
ON CONFLICT (queue, grp) DO UPDATE SET head_at = excluded.head_at, head_seq = excluded.head_seq
WHERE head_at IS NULL OR (excluded.head_at, excluded.head_seq) < (head_at, head_seq);

-- name: groups_ready
-- Groups with room whose first job is due, in start order, with that job.
SELECT grp, running, head_at, head_seq FROM tinystore_groups
WHERE queue = ? AND ready = 1 AND head_at IS NOT NULL AND head_at <= ?
ORDER BY head_at, head_seq LIMIT ?;

-- name: group_get
-- One group.
SELECT running, head_at, head_seq, ready, wake_at FROM tinystore_groups WHERE queue = ? AND grp = ?;

-- name: group_set
-- A group's counts and head after a claim or a settlement.
UPDATE tinystore_groups SET running = :running, head_at = :head_at, head_seq = :head_seq,
    ready = :ready, wake_at = :wake_at
WHERE queue = :queue AND grp = :grp;

-- name: group_drop
-- A group with nothing queued and nothing running.
DELETE FROM tinystore_groups WHERE queue = ? AND grp = ?;

-- name: groups_update
-- Groups a claim or a settlement touched (a JSON array of [grp, change in running]): running count,
-- head (first queued job) and room read again; materialized, so each group is found by its key.
WITH c AS MATERIALIZED (SELECT value ->> 0 AS grp, value ->> 1 AS change FROM json_each(:changes))
UPDATE tinystore_groups AS g
SET running = max(0, g.running + c.change),
    (head_at, head_seq) = (SELECT at, seq FROM tinystore_jobs
                           WHERE queue = g.queue AND grp = g.grp AND state = 'queued'
                           ORDER BY at, seq LIMIT 1),
    ready = (max(0, g.running + c.change) < :limit AND g.wake_at IS NULL)
FROM c
WHERE g.queue = :queue AND g.grp = c.grp;

-- name: groups_drop_idle
-- Of these groups (a JSON array), those with nothing queued and nothing running.
DELETE FROM tinystore_groups
WHERE queue = ? AND grp IN (SELECT value FROM json_each(?)) AND running = 0 AND head_at IS NULL;

-- name: groups_woken
-- Rate-limited groups whose window has room again.
SELECT grp FROM tinystore_groups WHERE queue = ? AND wake_at <= ?;

-- name: groups_refresh
-- Recompute whether each group of a queue has room, after its limits changed; a group set aside by
-- its rate is woken at the next claim (wake_at 0), which counts its window under the new rate.
UPDATE tinystore_groups SET ready = (running < :limit AND wake_at IS NULL),
    wake_at = CASE WHEN wake_at IS NULL THEN NULL ELSE 0 END
WHERE queue = :queue;

-- name: next_group
-- When the next group with room has a due job.
SELECT head_at FROM tinystore_groups
WHERE queue = ? AND ready = 1 AND head_at IS NOT NULL ORDER BY head_at, head_seq LIMIT 1;

-- name: next_group_wake
-- When the next rate-limited group has room again (wake_at IS NOT NULL: read from the wake index,
-- not from every group of the queue).
SELECT min(wake_at) FROM tinystore_groups WHERE queue = ? AND wake_at IS NOT NULL;

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

-- name: start_insert
-- Record a start for the rate windows.
INSERT INTO tinystore_starts (queue, grp, t) VALUES (?, ?, ?);

-- name: starts_prune
-- Starts older than every window of a queue.
DELETE FROM tinystore_starts WHERE queue = ? AND t <= ?;

-- name: count_add
-- Add to the per-minute counts of a queue.
INSERT INTO tinystore_counts (queue, minute, started, done, failed) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (queue, minute) DO UPDATE SET started = started + excluded.started,
    done = done + excluded.done, failed = failed + excluded.failed;

-- name: cancelled_mark
-- Remember that a job was cancelled, for its watchers.
INSERT OR REPLACE INTO tinystore_cancelled (job, at) VALUES (?, ?);

-- name: cancelled_get
-- Whether a job that is gone was cancelled.
SELECT 1 FROM tinystore_cancelled WHERE job = ?;

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

-- name: process_delete
-- A process that ended.
DELETE FROM tinystore_processes WHERE id = ?;

-- name: expired_jobs
-- Done and failed jobs past their time, a batch at a time.
SELECT seq FROM tinystore_jobs WHERE expires <= ? LIMIT ?;

-- name: cancelled_prune
-- Cancellation marks no watcher needs any more.
DELETE FROM tinystore_cancelled WHERE at <= ?;

-- name: counts_prune
-- Per-minute counts older than a day.
DELETE FROM tinystore_counts WHERE minute <= ?;

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
-- Per queue, its queued jobs due after now, counted over the due indexes (a seek per queue and per
-- group): what is scheduled, never what waits.
SELECT queue, sum(n) FROM (
    SELECT q.name AS queue, (SELECT count(*) FROM tinystore_jobs
                             WHERE queue = q.name AND state = 'queued' AND grp IS NULL AND at > :now) AS n
    FROM tinystore_queues q
    UNION ALL
    SELECT g.queue, (SELECT count(*) FROM tinystore_jobs
                     WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND at > :now)
    FROM tinystore_groups g
) GROUP BY queue HAVING sum(n) > 0;

-- name: first_due
-- Per queue, the time of its first queued job: the first entry of its due index, and of each of its
-- groups' (a seek per group).
SELECT q.name,
       (SELECT min(at) FROM tinystore_jobs WHERE queue = q.name AND state = 'queued' AND grp IS NULL),
       (SELECT min((SELECT min(at) FROM tinystore_jobs
                    WHERE queue = g.queue AND grp = g.grp AND state = 'queued' AND grp IS NOT NULL))
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
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat
FROM tinystore_jobs
WHERE queue = :queue AND id > :after
  AND (expires IS NULL OR expires > :now)
  AND (:stored IS NULL OR state = :stored) AND (:due IS NULL OR (at <= :now) = :due)
ORDER BY id LIMIT :limit;

-- name: jobs_page_failed
-- A page of a queue's failed jobs, by the index of failed jobs.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat
FROM tinystore_jobs INDEXED BY tinystore_jobs_failed
WHERE queue = :queue AND state = 'failed' AND id > :after
  AND (:grp IS NULL OR grp = :grp)
  AND (expires IS NULL OR expires > :now)
ORDER BY id LIMIT :limit;

-- name: jobs_page_running
-- A page of a queue's running jobs, from their leases (as many as run, however many are kept).
SELECT j.seq, j.queue, j.id, CAST(j.payload AS BLOB), j.grp, j.state, j.at, j.attempt, CAST(j.error AS BLOB),
       CAST(j.progress AS BLOB), j.expires, CAST(j.result AS BLOB), j.repeat
FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.queue = :queue AND j.state = 'running' AND j.id > :after
  AND (:grp IS NULL OR j.grp = :grp)
ORDER BY j.id LIMIT :limit;

-- name: jobs_page_group
-- A page of one group's jobs, by the index of grouped jobs.
SELECT seq, queue, id, CAST(payload AS BLOB), grp, state, at, attempt, CAST(error AS BLOB),
       CAST(progress AS BLOB), expires, CAST(result AS BLOB), repeat
FROM tinystore_jobs INDEXED BY tinystore_jobs_group
WHERE queue = :queue AND grp = :grp AND id > :after
  AND (expires IS NULL OR expires > :now)
  AND (:stored IS NULL OR state = :stored) AND (:due IS NULL OR (at <= :now) = :due)
ORDER BY id LIMIT :limit;

-- name: group_running
-- Live leases of one group, counted from the leases themselves.
SELECT count(*) FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.queue = ? AND j.grp = ?;

-- name: group_ensure
-- A group's row, created empty when missing.
INSERT OR IGNORE INTO tinystore_groups (queue, grp) VALUES (?, ?);

-- name: owner_groups
-- The groups of the jobs a process holds in a queue.
SELECT DISTINCT j.grp FROM tinystore_leases l JOIN tinystore_jobs j ON j.seq = l.job
WHERE l.owner = ? AND l.queue = ? AND j.grp IS NOT NULL;

-- name: owner_queues
-- The queues in which a process holds leases.
SELECT DISTINCT queue FROM tinystore_leases WHERE owner = ?;

-- name: owner_lost
-- A dead process's attempts end: jobs at their last attempt fail for good, the
-- others run again at once; every attempt stays counted. Returns each job's new state.
-- Repeating jobs are not among them: each is decided apart, as its next time is its rule's.
UPDATE tinystore_jobs SET
    state = CASE WHEN attempt >= :attempts THEN 'failed' ELSE 'queued' END,
    at = CASE WHEN attempt >= :attempts THEN at ELSE :now END,
    expires = CASE WHEN attempt >= :attempts THEN :expires END,
    error = :error, progress = NULL
WHERE seq IN (SELECT job FROM tinystore_leases WHERE owner = :owner AND queue = :queue)
  AND state = 'running' AND repeat IS NULL
RETURNING state;

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

-- name: leases_held
-- Which of these jobs (a JSON array) a process still holds.
SELECT job FROM tinystore_leases WHERE owner = ? AND job IN (SELECT value FROM json_each(?));

-- name: watched_insert
-- A process begins to watch a job: from its commit on, the job's changes are logged.
INSERT OR IGNORE INTO tinystore_watched (job, owner) VALUES (?, ?);

-- name: watched_delete
-- A process no longer watches a job.
DELETE FROM tinystore_watched WHERE job = ? AND owner = ?;

-- name: watched_delete_owner
-- A process that closed or died watches nothing.
DELETE FROM tinystore_watched WHERE owner = ?;

-- name: changes_prune_job
-- The changes of a job nobody watches any more.
DELETE FROM tinystore_changes WHERE job = :job AND NOT EXISTS (SELECT 1 FROM tinystore_watched WHERE job = :job);

-- name: changes_prune
-- The changes of every job nobody watches (left by processes that died).
DELETE FROM tinystore_changes WHERE job NOT IN (SELECT job FROM tinystore_watched);

-- name: changes_since
-- The changes of several watched jobs, each after its own cursor (a JSON array of [seq, change id]),
-- in commit order: each job's are read from the (job, id) index.
SELECT c.id, c.job, c.state, c.at, c.attempt, c.error, c.progress
FROM json_each(?) AS w JOIN tinystore_changes AS c ON c.job = w.value ->> 0 AND c.id > w.value ->> 1
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
