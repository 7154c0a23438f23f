-- 011: the release of tinystore that last opened the store, and the schema version (the newest migration)
-- it left, written at an open that changes either. One row. A store whose migrations go beyond those a release knows was
-- made by a later release: that release refuses it, untouched (the migrations table tells; this row says
-- which release).
CREATE TABLE {schema}.release (
    id             integer PRIMARY KEY CHECK (id = 1),
    release        text NOT NULL,
    schema_version integer NOT NULL,
    opened_at      timestamptz NOT NULL
);
