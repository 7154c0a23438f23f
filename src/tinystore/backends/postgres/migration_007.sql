-- 007: priorities across and within groups. A group keeps the highest priority of its queued jobs
-- (top_priority), and a claim reads ready groups priority by priority, highest first, each priority's
-- due heads first in its index: the groups whose first job is scheduled for later are never read.
-- Within a group its due jobs are read the same way, from an index of the group's jobs by priority,
-- starting at the group's top: where that priority's jobs are due (one priority in use, say), one read.
ALTER TABLE {schema}.groups ADD COLUMN top_priority smallint NOT NULL DEFAULT 0;
UPDATE {schema}.groups g SET top_priority = coalesce(
    (SELECT max(j.priority) FROM {schema}.jobs j WHERE j.queue = g.queue AND j.grp = g.grp AND j.state = 'queued'), 0);
CREATE INDEX groups_ready_priority ON {schema}.groups (queue, top_priority, head_at, head_seq)
    WHERE ready AND head_at IS NOT NULL;
CREATE INDEX jobs_group_priority ON {schema}.jobs (queue, grp, priority, at, seq)
    WHERE state = 'queued' AND grp IS NOT NULL;
