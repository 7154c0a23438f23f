-- 002: a watcher sees every change of the job it watches (JOB-13), as SQLite's 003. While a job is
-- watched, a trigger logs each change of its state, time, attempt, error and progress, and tells every
-- listening process with pg_notify on the store's channel ({channel}), so that watchers elsewhere read
-- it at once (SQLite's watchers see the file change instead). A job nobody watches costs an index
-- probe of an empty table per row changed, and writes nothing.

CREATE TABLE {schema}.watched (
    job   bigint NOT NULL,
    owner integer NOT NULL,
    PRIMARY KEY (job, owner)
);

-- Each change of a watched job; state is NULL where the job left the queue. Ids come from an identity:
-- changes of one job are ordered by the row lock of the job, so a job's ids grow in its commit order,
-- which is all a watcher's cursor (per job) needs.
CREATE TABLE {schema}.changes (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job      bigint NOT NULL,
    state    text,
    at       double precision NOT NULL,
    attempt  integer NOT NULL,
    error    text,
    progress text
);
CREATE INDEX changes_job ON {schema}.changes (job, id);

-- plpgsql, where SQLite's triggers have a WHEN clause (PostgreSQL's WHEN takes no subquery).
CREATE FUNCTION {schema}.job_changed() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM {schema}.watched WHERE job = OLD.seq) THEN
            INSERT INTO {schema}.changes (job, state, at, attempt, error, progress)
            VALUES (OLD.seq, NULL, OLD.at, OLD.attempt, OLD.error, NULL);
            PERFORM pg_notify(TG_ARGV[0], json_build_object('w', OLD.seq)::text);
        END IF;
        RETURN OLD;
    END IF;
    IF EXISTS (SELECT 1 FROM {schema}.watched WHERE job = NEW.seq) THEN
        INSERT INTO {schema}.changes (job, state, at, attempt, error, progress)
        VALUES (NEW.seq, NEW.state, NEW.at, NEW.attempt, NEW.error, NEW.progress);
        PERFORM pg_notify(TG_ARGV[0], json_build_object('w', NEW.seq)::text);
    END IF;
    RETURN NEW;
END
$body$;

CREATE TRIGGER jobs_changed
AFTER UPDATE OF state, at, attempt, error, progress ON {schema}.jobs
FOR EACH ROW EXECUTE FUNCTION {schema}.job_changed('{channel}');

CREATE TRIGGER jobs_left
AFTER DELETE ON {schema}.jobs
FOR EACH ROW EXECUTE FUNCTION {schema}.job_changed('{channel}');
