-- 008: when maintenance last looked for damage in tinystore's tables (see _daily_check.py). One row: the
-- process that takes the day's check writes its time, so that of every process maintaining the store one
-- checks, once a day. 0 at first: the first maintenance checks.
CREATE TABLE tinystore_checked (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at REAL NOT NULL
);
INSERT INTO tinystore_checked (id, at) VALUES (1, 0);
