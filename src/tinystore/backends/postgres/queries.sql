-- The statements the PostgreSQL backend runs whose text is its own; the others are the engine's
-- (backends/_engine/queries.sql, read with %s placeholders and tables in the schema). {schema} is the
-- store's schema, quoted; tables are always named with it, as the application's connections
-- (store.transaction(), conn=) keep their own search_path. Each is here for one of these reasons:
-- - a list is a PostgreSQL array (%s::bigint[], ANY, unnest: psycopg adapts a Python list, and the
--   statement is prepared once all the same), where SQLite's reads a JSON array with json_each;
-- - text is read as text: PostgreSQL keeps only valid UTF-8 text, so SQLite's CAST(... AS BLOB) and its
--   decoding of damaged rows have no counterpart;
-- - a group's ready flag is a boolean; sums are cast to int (a sum of bigints is numeric);
-- - seqs (the jobs table's identity), advisory locks, notices (pg_notify, sent by the writer and by the
--   watch trigger), liveness (processes_unlocked), migrations and row locks are PostgreSQL's own.
-- Not here on purpose: SQLite's seq_next, seqs_reserve and sequence_floor, its notices log, and its
-- lock-file columns of processes.

-- name: lock_queue
-- One queue's transaction-level advisory lock (see _writer for why, and why several are taken sorted).
SELECT pg_advisory_xact_lock(%s, hashtext(%s));

-- name: lock_groups
-- Groups' transaction-level advisory locks (the group key, the hash of queue and group), taken in sorted
-- order before their rows are read or written: one transaction at a time changes a group's row, and a
-- head read again after the lock sees every add that committed before (see _writer).
SELECT pg_advisory_xact_lock(%s, hashtext(%s || chr(1) || g))
FROM (SELECT DISTINCT g FROM unnest(%s::text[]) AS g ORDER BY g) AS sorted;

-- name: count_add
-- Add to the per-minute counts of a queue, in a row of this session's (part: its backend's pid): claims
-- and settlements of several processes at once never wait for each other's row; readers sum the parts.
INSERT INTO {schema}.counts AS c (queue, minute, part, started, done, failed)
VALUES (%s, %s, pg_backend_pid(), %s, %s, %s)
ON CONFLICT (queue, minute, part) DO UPDATE SET started = c.started + excluded.started,
    done = c.done + excluded.done, failed = c.failed + excluded.failed;

-- name: jobs_insert
-- Add a batch of jobs in one statement, in the order given (seqs are drawn in that order, under the
-- queue's lock); an id that names a job already adds nothing. Returns the seqs and ids written.
INSERT INTO {schema}.jobs (queue, id, payload, grp, state, at, repeat, priority, batch)
SELECT %(queue)s, t.id, t.payload, t.grp, 'queued', t.at, t.repeat, t.priority, t.batch
FROM unnest(%(ids)s::text[], %(payloads)s::text[], %(grps)s::text[], %(ats)s::float8[], %(repeats)s::text[],
            %(priorities)s::int2[], %(batches)s::text[])
     WITH ORDINALITY AS t(id, payload, grp, at, repeat, priority, batch, n)
ORDER BY t.n
ON CONFLICT (queue, id) DO NOTHING
RETURNING seq, id;

-- name: jobs_insert_alone
-- An add that is its own transaction: a batch of jobs without a group, in the order given, with its
-- notice (sent when it commits; the same text twice in a transaction is delivered once). Every job
-- or none: none where an id names a kept job, and an id taken by an add committed since fails the
-- statement (no ON CONFLICT). Returns the seqs and ids written.
INSERT INTO {schema}.jobs (queue, id, payload, grp, state, at, repeat, priority)
SELECT %(queue)s, t.id, t.payload, t.grp, 'queued', t.at, t.repeat, t.priority
FROM unnest(%(ids)s::text[], %(payloads)s::text[], %(grps)s::text[], %(ats)s::float8[], %(repeats)s::text[],
            %(priorities)s::int2[])
     WITH ORDINALITY AS t(id, payload, grp, at, repeat, priority, n)
WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.queue = %(queue)s AND j.id = ANY(%(ids)s::text[]))
ORDER BY t.n
RETURNING seq, id, pg_notify(%(channel)s, %(notice)s);

-- name: job_insert
-- Add one job, unless its id names one already.
INSERT INTO {schema}.jobs (queue, id, payload, grp, state, at, repeat, priority, batch)
VALUES (%s, %s, %s, %s, 'queued', %s, %s, %s, %s)
ON CONFLICT (queue, id) DO NOTHING
RETURNING seq;

-- name: job_by_id
-- A job by its id.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs WHERE queue = %s AND id = %s;

-- name: job_by_seq
-- A job by its seq.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs WHERE seq = %s;

-- name: job_share
-- A job's row, held until the transaction ends (a watch begins: see watch_begin).
SELECT 1 FROM {schema}.jobs WHERE seq = %s FOR SHARE;

-- name: jobs_by_seqs
-- Several jobs by their seqs.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]);

-- name: ahead_many
-- For each of several waiting jobs of a queue, the due jobs that start before it: one pass over the
-- due jobs up to the last of them in start order (of priority :priority at (:at, :seq)). Those without
-- a group are read as ahead reads them (a range per priority present down to :priority; LATERAL with
-- OFFSET 0, which the planner does not flatten into a join with every due job of the queue), those of
-- a group from the groups' index.
SELECT seq, ahead FROM (
    SELECT seq, row_number() OVER (ORDER BY priority DESC, at, seq) - 1 AS ahead FROM (
        WITH RECURSIVE present(p) AS (
            SELECT (SELECT priority FROM {schema}.jobs WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
                    ORDER BY priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT priority FROM {schema}.jobs
                    WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND priority < present.p
                    ORDER BY priority DESC LIMIT 1)
            FROM present WHERE present.p > %(priority)s)
        SELECT j.priority, j.at, j.seq FROM present CROSS JOIN LATERAL (
            SELECT priority, at, seq FROM {schema}.jobs
            WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND priority = present.p
              AND at <= %(now)s AND (present.p > %(priority)s OR (at, seq) <= (%(at)s, %(seq)s))
            OFFSET 0) AS j
        WHERE present.p >= %(priority)s
        UNION ALL
        SELECT priority, at, seq FROM {schema}.jobs
        WHERE queue = %(queue)s AND state = 'queued' AND grp IS NOT NULL AND at <= %(now)s
          AND (priority > %(priority)s OR (priority = %(priority)s AND (at, seq) <= (%(at)s, %(seq)s)))
    ) AS due
) AS ranked WHERE seq = ANY(%(seqs)s::bigint[]);

-- name: take
-- Claim jobs: running, with their attempt counted now (JOB-04). A job no longer queued is not taken, nor
-- one whose row another claim holds (a group's head, which the pick read without locking it): claims
-- of many processes never wait for each other. A repeating job keeps its last error until a run succeeds.
UPDATE {schema}.jobs SET state = 'running', attempt = attempt + 1, progress = NULL,
    error = CASE WHEN repeat IS NULL THEN NULL ELSE error END
WHERE seq IN (SELECT seq FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]) AND state = 'queued'
              FOR UPDATE SKIP LOCKED)
RETURNING seq, id, payload, grp, at, attempt, repeat;

-- name: take_due
-- A claim of a queue without limits in one statement (one round trip): up to :want due jobs without a
-- group, picked in start order (JOB-01), taken (running, attempt counted: JOB-04) and leased. The walk
-- goes down the priorities present until they hold :want due jobs (each counted to at most :want, from
-- the index the claim reads: the jobs scheduled for later are not read); each priority's due rows are
-- locked as they are read, passing over those another claim holds (FOR UPDATE SKIP LOCKED), so claims
-- of many processes never wait for each other. It takes nothing where a ready group has a due head (the
-- first head read as next_times reads it, a probe per priority present in the ready groups' index) or a
-- group waits to be woken (those claims merge groups and run in steps: claim._pick), nor where the
-- queue's options kept are no longer :options, the ones it was judged by (claim.Take). A take sent
-- before the cycle ended its expired leases (:early) takes nothing while one is there: the job it
-- requeues must be among those its claim picks from.
WITH RECURSIVE walk(p, above, due) AS (
    SELECT top.p, 0, (SELECT count(*) FROM (SELECT FROM {schema}.jobs
                                            WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
                                              AND priority = top.p AND at <= %(now)s LIMIT %(want)s) d)::int
    FROM (SELECT (SELECT priority FROM {schema}.jobs WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
                  ORDER BY priority DESC LIMIT 1) AS p) top
    WHERE top.p IS NOT NULL
    UNION ALL
    SELECT below.p, walk.due, walk.due + (SELECT count(*) FROM (SELECT FROM {schema}.jobs
                                            WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
                                              AND priority = below.p AND at <= %(now)s LIMIT %(want)s) d)::int
    FROM walk CROSS JOIN LATERAL (
        SELECT (SELECT priority FROM {schema}.jobs WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
                  AND priority < walk.p ORDER BY priority DESC LIMIT 1) AS p) below
    WHERE walk.due < %(want)s AND below.p IS NOT NULL
),
picked AS (
    SELECT j.seq, j.priority, j.at FROM walk CROSS JOIN LATERAL (
        SELECT seq, priority, at FROM {schema}.jobs
        WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND priority = walk.p AND at <= %(now)s
        ORDER BY at, seq LIMIT %(want)s - walk.above
        FOR UPDATE SKIP LOCKED) j
    WHERE walk.above < %(want)s
      AND (SELECT options FROM {schema}.queues WHERE name = %(queue)s) IS NOT DISTINCT FROM %(options)s::text
      AND NOT (%(early)s AND EXISTS (SELECT FROM {schema}.leases WHERE queue = %(queue)s AND expires <= %(now)s))
      AND coalesce((WITH RECURSIVE tops(p) AS (
                        SELECT (SELECT top_priority FROM {schema}.groups
                                WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL
                                ORDER BY top_priority DESC LIMIT 1)
                        UNION ALL
                        SELECT (SELECT top_priority FROM {schema}.groups
                                WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL AND top_priority < tops.p
                                ORDER BY top_priority DESC LIMIT 1)
                        FROM tops WHERE tops.p IS NOT NULL)
                    SELECT min((SELECT head_at FROM {schema}.groups
                                WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL AND top_priority = tops.p
                                ORDER BY head_at LIMIT 1))
                    FROM tops), 'Infinity') > %(now)s
      AND NOT EXISTS (SELECT FROM {schema}.groups WHERE queue = %(queue)s AND wake_at IS NOT NULL)
),
taken AS (
    UPDATE {schema}.jobs AS j SET state = 'running', attempt = j.attempt + 1, progress = NULL,
        error = CASE WHEN j.repeat IS NULL THEN NULL ELSE j.error END
    FROM picked WHERE j.seq = picked.seq
    RETURNING j.seq, j.id, j.payload, j.grp, j.at, j.attempt, j.repeat, j.queue, picked.priority
),
leased AS (
    INSERT INTO {schema}.leases (job, attempt, queue, owner, expires)
    SELECT seq, attempt, queue, %(owner)s, %(expires)s FROM taken
)
SELECT seq, id, payload, grp, at, attempt, repeat FROM taken ORDER BY priority DESC, at, seq;

-- name: lease_insert
-- A lease per claimed job, naming its attempt.
INSERT INTO {schema}.leases (job, attempt, queue, owner, expires)
SELECT seq, attempt, queue, %s, %s FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]);

-- name: leases_end_many
-- End the leases of a batch of attempts (two arrays: jobs, attempts); returns the leases (job, attempt)
-- that were still held (the others' attempts are stale, JOB-05), each with its job's batch.
DELETE FROM {schema}.leases AS l
USING unnest(%(jobs)s::bigint[], %(attempts)s::int[]) AS t(job, attempt)
WHERE l.job = ANY(%(jobs)s::bigint[]) AND l.job = t.job AND l.attempt = t.attempt
RETURNING l.job, l.attempt, (SELECT j.batch FROM {schema}.jobs j WHERE j.seq = l.job);

-- name: jobs_delete_many
-- Jobs leave the queue.
DELETE FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]);

-- name: attempts_delete_many
-- The attempts kept of jobs that left the queue.
DELETE FROM {schema}.attempts WHERE job = ANY(%s::bigint[]);

-- name: steps_delete_many
-- The steps of jobs that left the queue.
DELETE FROM {schema}.steps WHERE job = ANY(%s::bigint[]);

-- name: lease_held_for_write
-- Whether an attempt still holds its lease, locked until the transaction ends: a progress or a step
-- written without the queue's lock cannot land after another process ended the lease and took the
-- job again (that process's DELETE of the lease waits for this commit). SQLite's writer orders it.
SELECT 1 FROM {schema}.leases WHERE job = %s AND attempt = %s FOR SHARE;

-- name: lease_lock
-- run.transaction (JOB-14): the attempt's lease, locked until the transaction ends, so that nothing
-- ends it meanwhile; no row when the attempt no longer holds it.
SELECT 1 FROM {schema}.leases WHERE job = %s AND attempt = %s FOR UPDATE;

-- name: groups_priority_below
-- The highest group priority (top_priority: its queued jobs' highest) below :above among the groups with
-- room and a head, due or not (NULL where none): one probe of their index by priority (ready is a
-- boolean here).
SELECT (SELECT top_priority FROM {schema}.groups
        WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL AND top_priority < %(above)s
        ORDER BY top_priority DESC LIMIT 1);

-- name: groups_ready
-- Groups of one priority with room whose first job is due, in the order of that job.
SELECT grp, running, top_priority FROM {schema}.groups
WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL AND top_priority = %(top)s AND head_at <= %(now)s
ORDER BY head_at, head_seq LIMIT %(want)s;

-- name: groups_update
-- One group a claim or a settlement touched (run for each, in one pipeline): running count changed by
-- :change, head (first queued job: the earliest of each priority's first, as head_of_group reads it),
-- priority and room read again. Found by its whole key: SQLite's one statement over a JSON array
-- (MATERIALIZED) has no safe counterpart here, as a join with an array read every group of the queue
-- wherever the planner had no statistics yet.
UPDATE {schema}.groups AS g
SET running = greatest(0, g.running + %(change)s),
    (head_at, head_seq) = (
        WITH RECURSIVE present(p) AS (
            SELECT (SELECT priority FROM {schema}.jobs WHERE queue = %(queue)s AND grp = %(grp)s AND state = 'queued'
                    ORDER BY priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT priority FROM {schema}.jobs
                    WHERE queue = %(queue)s AND grp = %(grp)s AND state = 'queued' AND priority < present.p
                    ORDER BY priority DESC LIMIT 1)
            FROM present WHERE present.p IS NOT NULL)
        SELECT (SELECT at FROM {schema}.jobs
                WHERE queue = %(queue)s AND grp = %(grp)s AND state = 'queued' AND priority = present.p
                ORDER BY at, seq LIMIT 1) AS at,
               (SELECT seq FROM {schema}.jobs
                WHERE queue = %(queue)s AND grp = %(grp)s AND state = 'queued' AND priority = present.p
                ORDER BY at, seq LIMIT 1) AS seq
        FROM present WHERE present.p IS NOT NULL
        ORDER BY at, seq LIMIT 1),
    top_priority = coalesce((SELECT j.priority FROM {schema}.jobs j
                             WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued'
                             ORDER BY j.priority DESC LIMIT 1), 0),
    ready = (greatest(0, g.running + %(change)s) < %(limit)s AND g.wake_at IS NULL)
WHERE g.queue = %(queue)s AND g.grp = %(grp)s;

-- name: groups_drop_idle
-- Of these groups, those with nothing queued and nothing running.
DELETE FROM {schema}.groups
WHERE queue = %s AND grp = ANY(%s::text[]) AND running = 0 AND head_at IS NULL;

-- name: starts_insert
-- Record starts for the rate windows (an array of groups, one per start; null for none).
INSERT INTO {schema}.starts (queue, grp, t) SELECT %(queue)s, g, %(t)s FROM unnest(%(grps)s::text[]) AS g;

-- name: process_next_id
-- The id of a registration about to be made: its liveness lock is taken before its row is visible.
SELECT nextval(pg_get_serial_sequence('{schema}.processes', 'id'));

-- name: process_insert
-- Register a process (again, after its keeper connection was made anew and found it gone).
INSERT INTO {schema}.processes (id, pid, host, started, seen) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING;

-- name: process_alive
-- A process's heartbeat, by the server's clock, from its keeper (see _keeper); no row: it was found dead.
UPDATE {schema}.processes SET alive = now() WHERE id = %s;

-- name: flush_log
-- A commit that waits for the disk and writes no row: a transactional message to the log (read by no one)
-- gives the transaction a WAL record of its own, so its commit waits for the flush, and every commit before
-- it is on the disk too once it returns (see the limited claim). Drawing a transaction id alone
-- (pg_current_xact_id) writes no WAL, and PostgreSQL then commits without waiting for the disk.
SELECT pg_logical_emit_message(true, 'tinystore', '');

-- name: processes_unlocked
-- Registered processes whose liveness lock no session of the server holds and whose writer's session
-- (named by its application_name, see writer_name) is gone too: dead, or connecting again. With the
-- seconds left of their grace (dead once it is past: a process whose sessions were ended a moment ago
-- takes its lock again and says it lives within it; end_dead confirms with live_try and process_stale),
-- and the queues where they hold leases (what a drain of those queues waits for, see dead_due).
SELECT p.id, %(grace)s - extract(epoch FROM now() - p.alive)::float8,
       ARRAY(SELECT DISTINCT l.queue FROM {schema}.leases l WHERE l.owner = p.id)
FROM {schema}.processes p
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

-- name: expired_queues
-- The queues that hold done or failed jobs past their time.
SELECT DISTINCT queue FROM {schema}.jobs WHERE expires <= %s;

-- name: expired_jobs
-- Done and failed jobs of a queue past their time, a batch at a time.
SELECT seq FROM {schema}.jobs WHERE queue = %s AND expires <= %s LIMIT %s;

-- name: queue_counts
-- Jobs per queue and state as the triggers keep them (migration 004): each queue's row, and the changes
-- appended since its last fold.
SELECT queue, sum(queued)::int, sum(running)::int, sum(done)::int, sum(failed)::int, sum(repeating)::int
FROM (SELECT queue, queued, running, done, failed, repeating FROM {schema}.queue_counts
      UNION ALL
      SELECT queue, queued, running, done, failed, repeating FROM {schema}.count_changes) AS kept
GROUP BY queue;

-- name: counts_fold
-- A queue's changes appended since its last fold, added to its row, where no other transaction is folding
-- them (the queue's fold lock, tried: a claim cycle never waits for another's fold, and leaves it).
WITH folding AS (SELECT pg_try_advisory_xact_lock(%(key)s, hashtext(%(queue)s)) AS mine),
folded AS (DELETE FROM {schema}.count_changes WHERE queue = %(queue)s AND (SELECT mine FROM folding)
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
-- Per queue, its queued jobs due after now, counted over the due indexes by priority: per queue and
-- per group, a probe for each priority present and a seek into its jobs after now. What is scheduled,
-- never what waits.
SELECT queue, sum(n)::int FROM (
    SELECT q.name AS queue, (
        WITH RECURSIVE present(p) AS (
            SELECT (SELECT j.priority FROM {schema}.jobs j
                    WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL
                    ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM {schema}.jobs j
                    WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL AND j.priority < present.p
                    ORDER BY j.priority DESC LIMIT 1)
            FROM present WHERE present.p IS NOT NULL)
        SELECT sum((SELECT count(*) FROM {schema}.jobs j
                    WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL AND j.priority = present.p
                      AND j.at > %(now)s))
        FROM present) AS n
    FROM {schema}.queues q
    UNION ALL
    SELECT g.queue, (
        WITH RECURSIVE present(p) AS (
            SELECT (SELECT j.priority FROM {schema}.jobs j
                    WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued' AND j.grp IS NOT NULL
                    ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM {schema}.jobs j
                    WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued' AND j.grp IS NOT NULL
                      AND j.priority < present.p
                    ORDER BY j.priority DESC LIMIT 1)
            FROM present WHERE present.p IS NOT NULL)
        SELECT sum((SELECT count(*) FROM {schema}.jobs j
                    WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued' AND j.grp IS NOT NULL
                      AND j.priority = present.p AND j.at > %(now)s))
        FROM present)
    FROM {schema}.groups g
) AS d
GROUP BY queue HAVING sum(n) > 0;

-- name: first_due
-- Per queue, the time of its first queued job: the first of each priority present in its due index by
-- priority, and in each of its groups' (a probe per priority, a seek per priority and group).
SELECT q.name,
       (WITH RECURSIVE present(p) AS (
            SELECT (SELECT j.priority FROM {schema}.jobs j
                    WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL
                    ORDER BY j.priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT j.priority FROM {schema}.jobs j
                    WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL AND j.priority < present.p
                    ORDER BY j.priority DESC LIMIT 1)
            FROM present WHERE present.p IS NOT NULL)
        SELECT min((SELECT j.at FROM {schema}.jobs j
                    WHERE j.queue = q.name AND j.state = 'queued' AND j.grp IS NULL AND j.priority = present.p
                    ORDER BY j.at LIMIT 1))
        FROM present),
       (SELECT min((WITH RECURSIVE present(p) AS (
                        SELECT (SELECT j.priority FROM {schema}.jobs j
                                WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued'
                                  AND j.grp IS NOT NULL
                                ORDER BY j.priority DESC LIMIT 1)
                        UNION ALL
                        SELECT (SELECT j.priority FROM {schema}.jobs j
                                WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued'
                                  AND j.grp IS NOT NULL AND j.priority < present.p
                                ORDER BY j.priority DESC LIMIT 1)
                        FROM present WHERE present.p IS NOT NULL)
                    SELECT min((SELECT j.at FROM {schema}.jobs j
                                WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued'
                                  AND j.grp IS NOT NULL AND j.priority = present.p
                                ORDER BY j.at LIMIT 1))
                    FROM present))
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
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs
WHERE queue = %(queue)s AND id > %(after)s
  AND (expires IS NULL OR expires > %(now)s)
  AND (%(stored)s::text IS NULL OR state = %(stored)s::text)
  AND (%(due)s::boolean IS NULL OR (at <= %(now)s) = %(due)s::boolean)
ORDER BY id LIMIT %(limit)s;

-- name: jobs_page_failed
-- A page of a queue's failed jobs, by the index of failed jobs.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs
WHERE queue = %(queue)s AND state = 'failed' AND id > %(after)s
  AND (%(grp)s::text IS NULL OR grp = %(grp)s::text)
  AND (expires IS NULL OR expires > %(now)s)
ORDER BY id LIMIT %(limit)s;

-- name: jobs_page_running
-- A page of a queue's running jobs, from their leases (as many as run, however many are kept).
SELECT j.seq, j.queue, j.id, j.payload, j.grp, j.state, j.at, j.attempt, j.error, j.progress, j.expires, j.result,
       j.repeat, j.priority
FROM {schema}.leases l JOIN {schema}.jobs j ON j.seq = l.job
WHERE l.queue = %(queue)s AND j.state = 'running' AND j.id > %(after)s
  AND (%(grp)s::text IS NULL OR j.grp = %(grp)s::text)
ORDER BY j.id LIMIT %(limit)s;

-- name: jobs_page_group
-- A page of one group's jobs, by the index of grouped jobs.
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs
WHERE queue = %(queue)s AND grp = %(grp)s::text AND id > %(after)s
  AND (expires IS NULL OR expires > %(now)s)
  AND (%(stored)s::text IS NULL OR state = %(stored)s::text)
  AND (%(due)s::boolean IS NULL OR (at <= %(now)s) = %(due)s::boolean)
ORDER BY id LIMIT %(limit)s;

-- name: owner_queues
-- The queues in which processes hold leases.
SELECT DISTINCT queue FROM {schema}.leases WHERE owner = ANY(%s::int[]) ORDER BY queue;

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

-- name: notify_written
-- notify_many where the transaction wrote (it has a transaction id): sent in a pipeline before the answers
-- that tell whether it wrote, so that a transaction that changed nothing tells nobody.
SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p WHERE pg_current_xact_id_if_assigned() IS NOT NULL;

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
-- In end_dead's transaction: whether a process found unlocked is still unlocked (this transaction holds
-- its lock then, until it commits: the process can neither take it again nor say it lives meanwhile, and
-- coming back it registers again only after its leases were ended).
SELECT pg_try_advisory_xact_lock(%s, %s);

-- name: process_stale
-- In end_dead's transaction, after live_try, in a statement of its own so that it reads a heartbeat
-- committed since the read of processes_unlocked: whether the process has not said it lives for the grace.
SELECT EXISTS (SELECT 1 FROM {schema}.processes WHERE id = %s AND alive < now() - make_interval(secs => %s));

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
-- When a claim that left places free should look again, in one round trip: the next lease to run out,
-- the next job without a group due, the next ready group's head due, the next rate-limited group's room
-- (SQLite's differs only in its ready flag, an integer).
-- The next job without a group and the next ready group's head are read from the indexes the claim
-- reads, by priority: a probe per priority present, then its first.
SELECT (SELECT min(expires) FROM {schema}.leases WHERE queue = %(queue)s),
       (WITH RECURSIVE present(p) AS (
            SELECT (SELECT priority FROM {schema}.jobs WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL
                    ORDER BY priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT priority FROM {schema}.jobs
                    WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND priority < present.p
                    ORDER BY priority DESC LIMIT 1)
            FROM present WHERE present.p IS NOT NULL)
        SELECT min((SELECT at FROM {schema}.jobs
                    WHERE queue = %(queue)s AND state = 'queued' AND grp IS NULL AND priority = present.p
                    ORDER BY at LIMIT 1))
        FROM present),
       (WITH RECURSIVE tops(p) AS (
            SELECT (SELECT top_priority FROM {schema}.groups WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL
                    ORDER BY top_priority DESC LIMIT 1)
            UNION ALL
            SELECT (SELECT top_priority FROM {schema}.groups
                    WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL AND top_priority < tops.p
                    ORDER BY top_priority DESC LIMIT 1)
            FROM tops WHERE tops.p IS NOT NULL)
        SELECT min((SELECT head_at FROM {schema}.groups
                    WHERE queue = %(queue)s AND ready AND head_at IS NOT NULL AND top_priority = tops.p
                    ORDER BY head_at LIMIT 1))
        FROM tops),
       (SELECT min(wake_at) FROM {schema}.groups WHERE queue = %(queue)s AND wake_at IS NOT NULL);

-- name: jobs_batches
-- The batches of jobs (an array of seqs) that belong to one.
SELECT seq, batch FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]) AND batch IS NOT NULL;

-- name: batches_delete_then
-- The batches whose then jobs (an array of seqs) leave.
DELETE FROM {schema}.batches WHERE then_seq = ANY(%s::bigint[]);

-- name: jobs_lock
-- The jobs of a chunk of cancel_many or retry_many, read again and locked (in seq order) before they
-- are acted on: a claim's SKIP LOCKED passes them by until the commit, and a row a claim took since
-- the walk read it is read as it is now (SQLite's single writer needs no lock).
SELECT seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority
FROM {schema}.jobs WHERE seq = ANY(%s::bigint[]) ORDER BY seq FOR UPDATE;

-- name: leases_drop_many
-- End the leases of jobs cancelled together, whatever their attempts.
DELETE FROM {schema}.leases WHERE job = ANY(%s::bigint[]);

-- name: cancelled_mark_many
-- Remember that jobs were cancelled together, for their watchers.
INSERT INTO {schema}.cancelled (job, at) SELECT unnest(%(seqs)s::bigint[]), %(at)s
ON CONFLICT (job) DO UPDATE SET at = excluded.at;

-- name: jobs_retry_failed_many
-- Failed jobs run again together, their attempts from zero.
UPDATE {schema}.jobs SET state = 'queued', attempt = 0, at = %(at)s, expires = NULL
WHERE seq = ANY(%(seqs)s::bigint[]) AND state = 'failed';

-- name: release_opened
-- The release that opens the store and the schema version it leaves (migration 011), at each open; written
-- only when either changed (opened_at: when this release first opened it).
INSERT INTO {schema}.release AS r (id, release, schema_version, opened_at) VALUES (1, %s, %s, now())
ON CONFLICT (id) DO UPDATE SET release = excluded.release, schema_version = excluded.schema_version,
                               opened_at = excluded.opened_at
WHERE r.release <> excluded.release OR r.schema_version <> excluded.schema_version;
