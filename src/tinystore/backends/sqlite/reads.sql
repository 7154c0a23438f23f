-- The reads of an operator's page (see ../_reads.py), named as in queries.sql.

-- name: minute_counts
-- Every queue's counts per minute from a minute on.
SELECT queue, minute, started, done, failed FROM tinystore_counts WHERE minute >= ? ORDER BY queue, minute;

-- name: starts_since
-- A queue's starts after a time (kept for its rate window).
SELECT count(*) FROM tinystore_starts WHERE queue = ? AND t > ?;

-- name: busiest_groups
-- A queue's groups with the most live leases.
SELECT grp, running FROM tinystore_groups WHERE queue = ? AND running > 0 ORDER BY running DESC, grp LIMIT ?;
