-- Every statement the PostgreSQL backend runs, each under a name with a line of description.
-- {schema} is the store's schema, quoted; tables are always named with it, as the application's
-- connections (store.transaction(), conn=) keep their own search_path.
-- Where SQLite's queries.sql passes a JSON array read with json_each, these take a PostgreSQL array
-- (%s::bigint[], unnest): psycopg adapts a Python list, and the statement is prepared once all the same.
-- Text is read as text: PostgreSQL keeps only valid UTF-8 text, so SQLite's CAST(... AS BLOB) and its
-- decoding of damaged rows have no counterpart.
-- Not here on purpose: SQLite's seq_next, seqs_reserve and sequence_floor (the jobs table's identity
-- hands out seqs), its notices log (notices are pg_notify, sent by the writer and by the watch trigger),
-- and its lock-file columns of processes (liveness is an advisory lock: processes_unlocked).

-- name: lock_queue
-- One queue's transaction-level advisory lock (see _writer for why, and why several are taken sorted).
SELECT pg_advisory_xact_lock(%s, hashtext(%s));

-- name: queue_options
-- The options a queue keeps in the store.
SELECT options FROM {schema}.queues WHERE name = %s;

-- name: queue_save
-- Keep a queue's options.
INSERT INTO {schema}.queues (name, options) VALUES (%s, %s)
ON CONFLICT (name) DO UPDATE SET options = excluded.options;

-- name: queue_names
-- Every queue the store knows.
SELECT name, options FROM {schema}.queues ORDER BY name;

-- name: jobs_insert
-- Add a batch of jobs in one statement, in the order given (seqs are drawn in that order, under the
-- queue's lock); an id that names a job already adds nothing. Returns the seqs and ids written.
INSERT INTO {schema}.jobs (queue, id, payload, grp, state, at, repeat)
SELECT %(queue)s, t.id, t.payload, t.grp, 'queued', t.at, t.repeat
FROM unnest(%(ids)s::text[], %(payloads)s::text[], %(grps)s::text[], %(ats)s::float8[], %(repeats)s::text[])
     WITH ORDINALITY AS t(id, payload, grp, at, repeat, n)
ORDER BY t.n
ON CONFLICT (queue, id) DO NOTHING
RETURNING seq, id;

-- name: job_insert
-- Add one job, unless its id names one already.
INSERT INTO {schema}.jobs (queue, id, payload, grp, state, at, repeat)
VALUES (%s, %s, %s, %s, 'queued', %s, %s)
ON CONFLICT (queue, id) DO NOTHING
RETURNING seq;

-- name: job_declare
-- A schedule's job takes its newest declaration's payload and rule (and time, where its rule changed).
UPDATE {schema}.jobs SET payload = %(payload)s, repeat = %(repeat)s, at = %(at)s WHERE seq = %(seq)s;

-- name: job_by_id
-- A job by its id.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat
FROM {schema}.jobs WHERE queue = %s AND id = %s;

-- name: job_by_seq
-- A job by its seq.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat
FROM {schema}.jobs WHERE seq = %s;

-- name: job_queue
-- The queue of a job.
SELECT queue FROM {schema}.jobs WHERE seq = %s;

-- name: jobs_by_seqs
-- Several jobs by their seqs.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat
FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]);

-- name: steps_delete
-- The steps of a job that is done: a later attempt will never ask for them.
DELETE FROM {schema}.steps WHERE job = %s;

-- name: ahead
-- Due jobs that start before (at, seq): without a group, then of any group, each from its index
-- (SQLite runs the two as two statements; here one round trip).
SELECT (SELECT count(*) FROM {schema}.jobs
        WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND at <= %(now)s
          AND (at, seq) < (%(at)s, %(seq)s))
     + (SELECT count(*) FROM {schema}.jobs
        WHERE queue = %(queue)s AND state = 'queued' AND grp IS NOT NULL AND at <= %(now)s
          AND (at, seq) < (%(at)s, %(seq)s));

-- name: ahead_many
-- For each of several waiting jobs of a queue, the due jobs that start before it: one pass over the
-- due jobs up to the last of them, (:at, :seq).
SELECT seq, ahead FROM (
    SELECT seq, row_number() OVER (ORDER BY at, seq) - 1 AS ahead FROM (
        SELECT at, seq FROM {schema}.jobs
        WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND at <= %(now)s
          AND (at, seq) <= (%(at)s, %(seq)s)
        UNION ALL
        SELECT at, seq FROM {schema}.jobs
        WHERE queue = %(queue)s AND state = 'queued' AND grp IS NOT NULL AND at <= %(now)s
          AND (at, seq) <= (%(at)s, %(seq)s)
    ) AS due
) AS ranked WHERE seq = ANY(%(seqs)s::bigint[]);

-- name: due_ungrouped
-- The first due jobs without a group, in start order.
SELECT at, seq, NULL::text FROM {schema}.jobs
WHERE queue = %s AND state = 'queued' AND grp IS NULL AND at <= %s
ORDER BY at, seq LIMIT %s;

-- name: due_in_group
-- The first due jobs of one group, in start order.
SELECT at, seq, grp FROM {schema}.jobs
WHERE queue = %s AND grp = %s AND state = 'queued' AND at <= %s
ORDER BY at, seq LIMIT %s;

-- name: head_of_group
-- The first queued job of a group, due or not.
SELECT at, seq FROM {schema}.jobs
WHERE queue = %s AND grp = %s AND state = 'queued'
ORDER BY at, seq LIMIT 1;

-- name: next_ungrouped
-- When the next job without a group is due.
SELECT at FROM {schema}.jobs
WHERE queue = %s AND state = 'queued' AND grp IS NULL
ORDER BY at, seq LIMIT 1;

-- name: take
-- Claim jobs: running, with their attempt counted now (JOB-04). A job no longer queued is not taken.
-- A repeating job keeps its last error until a run succeeds.
UPDATE {schema}.jobs SET state = 'running', attempt = attempt + 1, progress = NULL,
    error = CASE WHEN repeat IS NULL THEN NULL ELSE error END
WHERE seq = ANY(%s::bigint[]) AND state = 'queued'
RETURNING seq, id, payload, grp, at, attempt, repeat;

-- name: lease_insert
-- A lease per claimed job, naming its attempt.
INSERT INTO {schema}.leases (job, attempt, queue, owner, expires)
SELECT seq, attempt, queue, %s, %s FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]);

-- name: lease_count
-- Live leases of a queue.
SELECT count(*) FROM {schema}.leases WHERE queue = %s;

-- name: lease_end
-- End the lease of one attempt; no row when that attempt no longer holds it (JOB-05).
DELETE FROM {schema}.leases WHERE job = %s AND attempt = %s;

-- name: leases_end_many
-- End the leases of a batch of attempts (two arrays: jobs, attempts); returns the jobs whose attempt
-- still held its lease (the others are stale, JOB-05).
DELETE FROM {schema}.leases AS l
USING unnest(%(jobs)s::bigint[], %(attempts)s::int[]) AS t(job, attempt)
WHERE l.job = ANY(%(jobs)s::bigint[]) AND l.job = t.job AND l.attempt = t.attempt
RETURNING l.job;

-- name: jobs_delete_many
-- Jobs leave the queue.
DELETE FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]);

-- name: steps_delete_many
-- The steps of jobs that left the queue.
DELETE FROM {schema}.steps WHERE job = ANY(%s::bigint[]);

-- name: lease_held
-- Whether an attempt still holds its lease.
SELECT 1 FROM {schema}.leases WHERE job = %s AND attempt = %s;

-- name: lease_held_locked
-- Whether an attempt still holds its lease, locked until the transaction ends: a progress or a step
-- written without the queue's lock cannot land after another process ended the lease and took the
-- job again (that process's DELETE of the lease waits for this commit). SQLite's writer orders it.
SELECT 1 FROM {schema}.leases WHERE job = %s AND attempt = %s FOR SHARE;

-- name: lease_queue
-- The queue of an attempt's lease, where it holds one (run.transaction locks that queue first).
SELECT queue FROM {schema}.leases WHERE job = %s AND attempt = %s;

-- name: lease_lock
-- run.transaction (JOB-14): the attempt's lease, locked until the transaction ends, so that nothing
-- ends it meanwhile; no row when the attempt no longer holds it.
SELECT 1 FROM {schema}.leases WHERE job = %s AND attempt = %s FOR UPDATE;

-- name: lease_of_job
-- The lease a job is under, and its holder.
SELECT l.attempt, l.expires, p.pid, p.host
FROM {schema}.leases l LEFT JOIN {schema}.processes p ON p.id = l.owner
WHERE l.job = %s;

-- name: lease_renew
-- Renew the leases a process holds in a queue.
UPDATE {schema}.leases SET expires = %s WHERE owner = %s AND queue = %s;

-- name: leases_expired
-- Leases of a queue that ran out.
SELECT job, attempt FROM {schema}.leases WHERE queue = %s AND expires <= %s LIMIT 500;

-- name: next_expiry
-- When the next lease of a queue runs out.
SELECT min(expires) FROM {schema}.leases WHERE queue = %s;

-- name: job_requeue
-- An attempt ended: the job waits for `at` again; `uncount` 1 gives the attempt back, `reset` sets the
-- attempts to zero (a repeating job waiting for its next time).
UPDATE {schema}.jobs SET state = 'queued', at = %(at)s, error = %(error)s, progress = NULL,
    result = %(result)s, attempt = CASE WHEN %(reset)s THEN 0 ELSE attempt - %(uncount)s END
WHERE seq = %(seq)s;

-- name: job_fail
-- The job failed for good; it is kept with its error until `expires`.
UPDATE {schema}.jobs SET state = 'failed', error = %s, expires = %s, progress = NULL WHERE seq = %s;

-- name: job_done
-- The job is done; it is kept until `expires` so that its id adds nothing.
UPDATE {schema}.jobs SET state = 'done', error = NULL, expires = %s, progress = NULL, result = %s
WHERE seq = %s;

-- name: job_retry_failed
-- A failed job runs again, its attempts from zero.
UPDATE {schema}.jobs SET state = 'queued', attempt = 0, at = %s, expires = NULL
WHERE seq = %s AND state = 'failed';

-- name: job_progress
-- The progress a running attempt reports.
UPDATE {schema}.jobs SET progress = %s WHERE seq = %s AND state = 'running';

-- name: step_get
-- A kept step answer.
SELECT answer FROM {schema}.steps WHERE job = %s AND name = %s;

-- name: step_keep
-- Keep a step's answer.
INSERT INTO {schema}.steps (job, name, attempt, answer) VALUES (%s, %s, %s, %s)
ON CONFLICT (job, name) DO NOTHING;

-- name: step_insert
-- Keep a step's answer within run.transaction: a second keep of the same step fails, and rolls back.
INSERT INTO {schema}.steps (job, name, attempt, answer) VALUES (%s, %s, %s, %s);

-- name: steps_of_job
-- Every step kept under a job.
SELECT name, attempt, answer FROM {schema}.steps WHERE job = %s ORDER BY name;

-- name: group_add
-- A job joins its group: the group's head is its first queued job.
INSERT INTO {schema}.groups AS g (queue, grp, head_at, head_seq) VALUES (%(queue)s, %(grp)s, %(at)s, %(seq)s)
ON CONFLICT (queue, grp) DO UPDATE SET head_at = excluded.head_at, head_seq = excluded.head_seq
WHERE g.head_at IS NULL OR (excluded.head_at, excluded.head_seq) < (g.head_at, g.head_seq);

-- name: groups_ready
-- Groups with room whose first job is due, in start order, with that job.
SELECT grp, running, head_at, head_seq FROM {schema}.groups
WHERE queue = %s AND ready AND head_at IS NOT NULL AND head_at <= %s
ORDER BY head_at, head_seq LIMIT %s;

-- name: group_get
-- One group.
SELECT running, head_at, head_seq, ready, wake_at FROM {schema}.groups WHERE queue = %s AND grp = %s;

-- name: group_set
-- A group's counts and head after a claim or a settlement.
UPDATE {schema}.groups SET running = %(running)s, head_at = %(head_at)s, head_seq = %(head_seq)s,
    ready = %(ready)s, wake_at = %(wake_at)s
WHERE queue = %(queue)s AND grp = %(grp)s;

-- name: group_drop
-- A group with nothing queued and nothing running.
DELETE FROM {schema}.groups WHERE queue = %s AND grp = %s;

-- name: groups_update
-- One group a claim or a settlement touched (run for each, in one pipeline): running count changed by
-- :change, head (first queued job) and room read again. Found by its whole key: SQLite's one statement
-- over a JSON array (MATERIALIZED) has no safe counterpart here, as a join with an array read every
-- group of the queue wherever the planner had no statistics yet.
UPDATE {schema}.groups AS g
SET running = greatest(0, g.running + %(change)s),
    (head_at, head_seq) = (SELECT j.at, j.seq FROM {schema}.jobs j
                           WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued'
                           ORDER BY j.at, j.seq LIMIT 1),
    ready = (greatest(0, g.running + %(change)s) < %(limit)s AND g.wake_at IS NULL)
WHERE g.queue = %(queue)s AND g.grp = %(grp)s;

-- name: groups_drop_idle
-- Of these groups, those with nothing queued and nothing running.
DELETE FROM {schema}.groups
WHERE queue = %s AND grp = ANY(%s::text[]) AND running = 0 AND head_at IS NULL;

-- name: groups_woken
-- Rate-limited groups whose window has room again.
SELECT grp FROM {schema}.groups WHERE queue = %s AND wake_at <= %s;

-- name: groups_refresh
-- Recompute whether each group of a queue has room, after its limits changed; a group set aside by
-- its rate is woken at the next claim (wake_at 0), which counts its window under the new rate.
UPDATE {schema}.groups SET ready = (running < %(limit)s AND wake_at IS NULL),
    wake_at = CASE WHEN wake_at IS NULL THEN NULL ELSE 0 END
WHERE queue = %(queue)s;

-- name: next_group
-- When the next group with room has a due job.
SELECT head_at FROM {schema}.groups
WHERE queue = %s AND ready AND head_at IS NOT NULL ORDER BY head_at, head_seq LIMIT 1;

-- name: next_group_wake
-- When the next rate-limited group has room again.
SELECT min(wake_at) FROM {schema}.groups WHERE queue = %s AND wake_at IS NOT NULL;

-- name: starts_in_window
-- Starts of a queue in its sliding window, and the oldest of them.
SELECT count(*), min(t) FROM {schema}.starts WHERE queue = %s AND t > %s;

-- name: group_starts_in_window
-- Starts of one group in its sliding window, and the oldest of them.
SELECT count(*), min(t) FROM {schema}.starts WHERE queue = %s AND grp = %s AND t > %s;

-- name: starts_clamp
-- Starts counted later than now count as made now (see SQLite's).
UPDATE {schema}.starts SET t = %(now)s WHERE queue = %(queue)s AND t > %(now)s;

-- name: groups_wake_clamp
-- Groups set aside until later than now plus their window are woken now.
UPDATE {schema}.groups SET wake_at = %(now)s WHERE queue = %(queue)s AND wake_at > %(now)s + %(period)s;

-- name: starts_insert
-- Record starts for the rate windows (an array of groups, one per start).
INSERT INTO {schema}.starts (queue, grp, t) SELECT %s, g, %s FROM unnest(%s::text[]) AS g;

-- name: starts_prune
-- Starts older than every window of a queue.
DELETE FROM {schema}.starts WHERE queue = %s AND t <= %s;

-- name: count_add
-- Add to the per-minute counts of a queue.
INSERT INTO {schema}.counts AS c (queue, minute, started, done, failed) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (queue, minute) DO UPDATE SET started = c.started + excluded.started,
    done = c.done + excluded.done, failed = c.failed + excluded.failed;

-- name: cancelled_mark
-- Remember that a job was cancelled, for its watchers.
INSERT INTO {schema}.cancelled (job, at) VALUES (%s, %s)
ON CONFLICT (job) DO UPDATE SET at = excluded.at;

-- name: cancelled_get
-- Whether a job that is gone was cancelled.
SELECT 1 FROM {schema}.cancelled WHERE job = %s;

-- name: process_next_id
-- The id of a registration about to be made: its liveness lock is taken before its row is visible.
SELECT nextval(pg_get_serial_sequence('{schema}.processes', 'id'));

-- name: process_insert
-- Register a process (again, after its keeper connection was made anew and found it gone).
INSERT INTO {schema}.processes (id, pid, host, started, seen) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING;

-- name: process_seen
-- A process's heartbeat.
UPDATE {schema}.processes SET seen = %s WHERE id = %s;

-- name: processes_unlocked
-- Registered processes whose liveness lock no session of the server holds, and whose writer's session
-- (named by its application_name, see writer_name) is gone too: dead. A process whose keeper connection
-- alone was lost is not: it takes its lock again in a moment (end_dead confirms with a try-lock).
SELECT p.id FROM {schema}.processes p
WHERE p.id <> %(own)s AND NOT EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted
      AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
      AND l.classid = %(key)s::int4::oid AND l.objid = p.id::oid AND l.objsubid = 2)
  AND NOT EXISTS (
    SELECT 1 FROM pg_catalog.pg_stat_activity a
    WHERE a.datname = current_database() AND a.application_name = left('tinystore #' || p.id || ' ' || %(schema)s, 63));

-- name: writer_name
-- The writer's session names its process's registration (see processes_unlocked); kept at COMMIT.
SELECT set_config('application_name', left('tinystore #' || %s || ' ' || %s, 63), false);

-- name: process_delete
-- A process that ended.
DELETE FROM {schema}.processes WHERE id = %s;

-- name: expired_queues
-- The queues that hold done or failed jobs past their time.
SELECT DISTINCT queue FROM {schema}.jobs WHERE expires <= %s;

-- name: expired_jobs
-- Done and failed jobs of a queue past their time, a batch at a time.
SELECT seq FROM {schema}.jobs WHERE queue = %s AND expires <= %s LIMIT %s;

-- name: cancelled_prune
-- Cancellation marks no watcher needs any more.
DELETE FROM {schema}.cancelled WHERE at <= %s;

-- name: counts_prune
-- Per-minute counts older than a day.
DELETE FROM {schema}.counts WHERE minute <= %s;

-- name: queue_counts
-- Jobs per queue and state as the triggers keep them (migration 004): each queue's row, and the changes
-- appended since its last fold.
SELECT queue, sum(queued)::int, sum(running)::int, sum(done)::int, sum(failed)::int, sum(repeating)::int
FROM (SELECT queue, queued, running, done, failed, repeating FROM {schema}.queue_counts
      UNION ALL
      SELECT queue, queued, running, done, failed, repeating FROM {schema}.count_changes) AS kept
GROUP BY queue;

-- name: counts_fold
-- A queue's changes appended since its last fold, added to its row (the caller holds the queue's lock).
WITH folded AS (DELETE FROM {schema}.count_changes WHERE queue = %(queue)s
                RETURNING queued, running, done, failed, repeating)
INSERT INTO {schema}.queue_counts AS c (queue, queued, running, done, failed, repeating)
SELECT %(queue)s, sum(queued), sum(running), sum(done), sum(failed), sum(repeating) FROM folded
HAVING count(*) > 0
ON CONFLICT (queue) DO UPDATE
SET queued = c.queued + excluded.queued, running = c.running + excluded.running, done = c.done + excluded.done,
    failed = c.failed + excluded.failed, repeating = c.repeating + excluded.repeating;

-- name: expired_counts
-- Done and failed jobs past their time that maintenance has not removed yet: kept rows, no longer
-- counted. As many as maintenance is behind, read by the expires index.
SELECT queue, state, count(*)::int, count(repeat)::int FROM {schema}.jobs WHERE expires <= %(now)s
GROUP BY queue, state;

-- name: scheduled_counts
-- Per queue, its queued jobs due after now, counted over the due indexes (a seek per queue and per
-- group): what is scheduled, never what waits.
SELECT queue, sum(n)::int FROM (
    SELECT q.name AS queue, (SELECT count(*) FROM {schema}.jobs j
                             WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL
                               AND j.at > %(now)s) AS n
    FROM {schema}.queues q
    UNION ALL
    SELECT g.queue, (SELECT count(*) FROM {schema}.jobs j
                     WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued' AND j.grp IS NOT NULL
                       AND j.at > %(now)s)
    FROM {schema}.groups g
) AS d
GROUP BY queue HAVING sum(n) > 0;

-- name: first_due
-- Per queue, the time of its first queued job: the first entry of its due index, and of each of its
-- groups' (a seek per group).
SELECT q.name,
       (SELECT min(j.at) FROM {schema}.jobs j WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL),
       (SELECT min((SELECT min(j.at) FROM {schema}.jobs j
                    WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued' AND j.grp IS NOT NULL))
        FROM {schema}.groups g WHERE g.queue = q.name)
FROM {schema}.queues q;

-- name: recent_counts
-- Runs and outcomes per queue since a minute.
SELECT queue, sum(started)::int, sum(done)::int, sum(failed)::int FROM {schema}.counts
WHERE minute >= %s GROUP BY queue;

-- name: jobs_page
-- A page of a queue's jobs in the order of their ids, after an id (which may have left meanwhile),
-- walking the queue's ids: as fast as the state asked for is common (_reads.page_of picks the
-- statements below where an index holds only the jobs asked for).
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat
FROM {schema}.jobs
WHERE queue = %(queue)s AND id > %(after)s
  AND (expires IS NULL OR expires > %(now)s)
  AND (%(stored)s::text IS NULL OR state = %(stored)s::text)
  AND (%(due)s::boolean IS NULL OR (at <= %(now)s) = %(due)s::boolean)
ORDER BY id LIMIT %(limit)s;

-- name: jobs_page_failed
-- A page of a queue's failed jobs, by the index of failed jobs.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat
FROM {schema}.jobs
WHERE queue = %(queue)s AND state = 'failed' AND id > %(after)s
  AND (%(grp)s::text IS NULL OR grp = %(grp)s::text)
  AND (expires IS NULL OR expires > %(now)s)
ORDER BY id LIMIT %(limit)s;

-- name: jobs_page_running
-- A page of a queue's running jobs, from their leases (as many as run, however many are kept).
SELECT j.seq, j.queue, j.id, j.payload, j.grp, j.state, j.at, j.attempt, j.error, j.progress, j.expires, j.result,
       j.repeat
FROM {schema}.leases l JOIN {schema}.jobs j ON j.seq = l.job
WHERE l.queue = %(queue)s AND j.state = 'running' AND j.id > %(after)s
  AND (%(grp)s::text IS NULL OR j.grp = %(grp)s::text)
ORDER BY j.id LIMIT %(limit)s;

-- name: jobs_page_group
-- A page of one group's jobs, by the index of grouped jobs.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat
FROM {schema}.jobs
WHERE queue = %(queue)s AND grp = %(grp)s::text AND id > %(after)s
  AND (expires IS NULL OR expires > %(now)s)
  AND (%(stored)s::text IS NULL OR state = %(stored)s::text)
  AND (%(due)s::boolean IS NULL OR (at <= %(now)s) = %(due)s::boolean)
ORDER BY id LIMIT %(limit)s;

-- name: group_running
-- Live leases of one group, counted from the leases themselves.
SELECT count(*) FROM {schema}.leases l JOIN {schema}.jobs j ON j.seq = l.job
WHERE l.queue = %s AND j.grp = %s;

-- name: group_ensure
-- A group's row, created empty when missing.
INSERT INTO {schema}.groups (queue, grp) VALUES (%s, %s) ON CONFLICT (queue, grp) DO NOTHING;

-- name: owner_groups
-- The groups of the jobs a process holds in a queue.
SELECT DISTINCT j.grp FROM {schema}.leases l JOIN {schema}.jobs j ON j.seq = l.job
WHERE l.owner = %s AND l.queue = %s AND j.grp IS NOT NULL;

-- name: owner_queues
-- The queues in which processes hold leases.
SELECT DISTINCT queue FROM {schema}.leases WHERE owner = ANY(%s::int[]) ORDER BY queue;

-- name: owner_lost
-- A dead process's attempts end: jobs at their last attempt fail for good, the
-- others run again at once; every attempt stays counted. Returns each job's new state.
-- Repeating jobs are not among them: each is decided apart, as its next time is its rule's.
UPDATE {schema}.jobs SET
    state = CASE WHEN attempt >= %(attempts)s THEN 'failed' ELSE 'queued' END,
    at = CASE WHEN attempt >= %(attempts)s THEN at ELSE %(now)s END,
    expires = CASE WHEN attempt >= %(attempts)s THEN %(expires)s END,
    error = %(error)s, progress = NULL
WHERE seq IN (SELECT job FROM {schema}.leases WHERE owner = %(owner)s AND queue = %(queue)s)
  AND state = 'running' AND repeat IS NULL
RETURNING state;

-- name: owner_repeating
-- The attempts of repeating jobs a dead process held in a queue.
SELECT l.job, l.attempt FROM {schema}.leases l JOIN {schema}.jobs j ON j.seq = l.job
WHERE l.owner = %s AND l.queue = %s AND j.repeat IS NOT NULL;

-- name: owner_leases_end
-- The leases a process holds in a queue end.
DELETE FROM {schema}.leases WHERE owner = %s AND queue = %s;

-- name: lease_drop
-- End a job's lease, whatever its attempt (the job is cancelled).
DELETE FROM {schema}.leases WHERE job = %s;

-- name: leases_held
-- Which of these jobs a process still holds.
SELECT job FROM {schema}.leases WHERE owner = %s AND job = ANY(%s::bigint[]);

-- name: watched_insert
-- A process begins to watch a job: from its commit on, the job's changes are logged.
INSERT INTO {schema}.watched (job, owner) VALUES (%s, %s) ON CONFLICT DO NOTHING;

-- name: watched_delete
-- A process no longer watches a job.
DELETE FROM {schema}.watched WHERE job = %s AND owner = %s;

-- name: watched_delete_owner
-- A process that closed or died watches nothing.
DELETE FROM {schema}.watched WHERE owner = %s;

-- name: changes_prune_job
-- The changes of a job nobody watches any more.
DELETE FROM {schema}.changes WHERE job = %(job)s
AND NOT EXISTS (SELECT 1 FROM {schema}.watched WHERE job = %(job)s);

-- name: changes_prune
-- The changes of every job nobody watches (left by processes that died).
DELETE FROM {schema}.changes c WHERE NOT EXISTS (SELECT 1 FROM {schema}.watched w WHERE w.job = c.job);

-- name: changes_since
-- The changes of several watched jobs, each after its own cursor (two arrays: seqs, change ids),
-- in commit order: each job's are read from the (job, id) index.
SELECT c.id, c.job, c.state, c.at, c.attempt, c.error, c.progress
FROM unnest(%(jobs)s::bigint[], %(cursors)s::bigint[]) AS w(job, cursor)
JOIN {schema}.changes AS c ON c.job = w.job AND c.id > w.cursor
WHERE c.job = ANY(%(jobs)s::bigint[])
ORDER BY c.id;

-- name: notify_many
-- A commit's notices, each sent to the store's channel when it commits (an array of JSON texts).
SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p;

-- name: notify_one
-- One notice, sent when the transaction commits (an add in the application's transaction).
SELECT pg_notify(%s, %s);

-- name: work_done
-- The rows the transaction so far read (by sequential and index scans) and wrote in the schema's
-- tables: a measure of its work, for tests (SQLite's counterpart is its virtual machine's steps).
SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0) + n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint
FROM pg_catalog.pg_stat_xact_user_tables WHERE schemaname = %s;

-- name: live_lock
-- This process's liveness lock, held by its keeper connection for as long as it lives (see _keeper).
-- Blocking: another process may hold it for the moment it takes to confirm this one dead.
SELECT pg_advisory_lock(%s, %s);

-- name: live_try
-- In end_dead's transaction: whether a process found unlocked is dead (this transaction holds its lock
-- then, until it commits: a process coming back registers again only after its leases were ended).
SELECT pg_try_advisory_xact_lock(%s, %s);

-- name: migrate_lock
-- Migrations one open at a time, per schema: (liveness key, 0), an id no registration has.
SELECT pg_advisory_xact_lock(%s, 0);

-- name: migrations_table
-- The migrations applied, by number.
CREATE TABLE IF NOT EXISTS {schema}.migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migrations_done
SELECT version FROM {schema}.migrations;

-- name: migration_insert
INSERT INTO {schema}.migrations (version) VALUES (%s);

-- name: server_identity
-- Which server and database a connection is to: the postmaster's start time tells servers apart
-- (two clusters on one host, a primary and its standby), current_database() the database. The start
-- time as a number: an application's connection may load timestamps naive (Django with USE_TZ = False).
SELECT current_database(), extract(epoch FROM pg_postmaster_start_time());

-- name: next_times
-- When a claim that left places free should look again, in one round trip (SQLite runs these four as
-- next_expiry, next_ungrouped, next_group and next_group_wake): the next lease to run out, the next
-- job without a group due, the next ready group's head due, the next rate-limited group's room.
SELECT (SELECT min(expires) FROM {schema}.leases WHERE queue = %(queue)s),
       (SELECT at FROM {schema}.jobs WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
        ORDER BY at, seq LIMIT 1),
       (SELECT head_at FROM {schema}.groups WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL
        ORDER BY head_at, head_seq LIMIT 1),
       (SELECT min(wake_at) FROM {schema}.groups WHERE queue = %(queue)s AND wake_at IS NOT NULL);
