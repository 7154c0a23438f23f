-- 003: results and repeating jobs, as SQLite's 006. ``result`` is the JSON text a handler returned, kept
-- while its done job is kept (a repeating job keeps its last run's); ``repeat`` is the rule of a job that
-- repeats (JSON text, see tinystore._repeat), NULL for a job that runs once.
ALTER TABLE {schema}.jobs ADD COLUMN result text;
ALTER TABLE {schema}.jobs ADD COLUMN repeat text;
