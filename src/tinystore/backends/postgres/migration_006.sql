-- 006: priorities. A job's priority, an int from -100 to 100 (0 unless given), orders the due jobs of
-- its queue: the highest first, then by time, then in the order added (JOB-01).
-- A claim reads the due jobs without a group by this index, priority by priority among those present
-- (a probe for the next priority down, then the due ones of it): the jobs scheduled for later sit
-- after the due ones of their priority and are never read. The index by (queue, at, seq) stays for
-- what asks by time only (the next due time, the scheduled counts).
ALTER TABLE {schema}.jobs ADD COLUMN priority smallint NOT NULL DEFAULT 0;
CREATE INDEX jobs_due_priority ON {schema}.jobs (queue, priority, at, seq)
    WHERE state = 'queued' AND grp IS NULL;
