-- 013: the release of tinystore that last opened the store, and the schema version (the newest migration)
-- it left, written at an open that changes either. One row. A store whose migrations go beyond those a release knows was
-- made by a later release: that release refuses it, untouched (tinystore_migrations tells; this row says
-- which release).
CREATE TABLE tinystore_release (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    release        TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    opened_at      TEXT NOT NULL
);
