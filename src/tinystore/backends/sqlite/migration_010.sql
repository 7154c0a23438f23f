-- 010: priorities across and within groups. A group keeps the highest priority of its queued jobs
-- (top_priority), and a claim reads ready groups priority by priority, highest first, each priority's
-- due heads first in its index: the groups whose first job is scheduled for later are never read.
-- Within a group its due jobs are read the same way, from an index of the group's jobs by priority,
-- starting at the group's top: where that priority's jobs are due (one priority in use, say), one read.
ALTER TABLE tinystore_groups ADD COLUMN top_priority INTEGER NOT NULL DEFAULT 0;
UPDATE tinystore_groups SET top_priority = coalesce(
    (SELECT max(priority) FROM tinystore_jobs j
     WHERE j.queue = tinystore_groups.queue AND j.grp = tinystore_groups.grp AND j.state = 'queued'), 0);
CREATE INDEX tinystore_groups_ready_priority ON tinystore_groups (queue, top_priority, head_at, head_seq)
    WHERE ready = 1 AND head_at IS NOT NULL;
CREATE INDEX tinystore_jobs_group_priority ON tinystore_jobs (queue, grp, priority, at, seq)
    WHERE state = 'queued' AND grp IS NOT NULL;
