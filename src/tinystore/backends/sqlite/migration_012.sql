-- 012: one due index per purpose. Every read of the due jobs, of a group's head and of the ready groups
-- now walks the indexes by priority (009, 010): a probe per priority present, then a range or a seek
-- within it. The indexes by time alone that 001 made are read by nothing, and each add, claim and
-- settlement wrote them beside those by priority.
DROP INDEX tinystore_jobs_due;
DROP INDEX tinystore_jobs_group_due;
DROP INDEX tinystore_groups_ready;
