-- The reads of an operator's page (see ../_reads.py), named as in queries.sql; {schema} is the schema.

-- name: minute_counts
-- Every queue's counts per minute from a minute on.
SELECT queue, minute, sum(started)::int, sum(done)::int, sum(failed)::int FROM {schema}.counts WHERE minute >= %s
GROUP BY queue, minute ORDER BY queue, minute;

-- name: starts_since
-- A queue's starts after a time (kept for its rate window).
SELECT count(*) FROM {schema}.starts WHERE queue = %s AND t > %s;

-- name: busiest_groups
-- A queue's groups with the most live leases.
SELECT grp, running FROM {schema}.groups WHERE queue = %s AND running > 0 ORDER BY running DESC, grp LIMIT %s;
