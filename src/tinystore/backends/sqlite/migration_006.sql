-- 006: results and repeating jobs. ``result`` is the JSON text a handler returned, kept while its done
-- job is kept (a repeating job keeps its last run's); ``repeat`` is the rule of a job that repeats
-- (JSON text: {"cron": "10 3 * * *", "zone": "Europe/Moscow"} or {"every": 900}), NULL for a job
-- that runs once. A repeating job is an ordinary queued job between its runs, so claims stay indexed.
ALTER TABLE tinystore_jobs ADD COLUMN result TEXT;
ALTER TABLE tinystore_jobs ADD COLUMN repeat TEXT;
