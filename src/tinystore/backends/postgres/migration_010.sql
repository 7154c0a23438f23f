-- 010: one due index per purpose. Every read of the due jobs, of a group's head and of the ready groups
-- now walks the indexes by priority (006, 007): a probe per priority present, then a range or a seek
-- within it. The indexes by time alone that 001 made are read by nothing, and each add, claim and
-- settlement wrote them beside those by priority.
DROP INDEX {schema}.jobs_due;
DROP INDEX {schema}.jobs_group_due;
DROP INDEX {schema}.groups_ready;
