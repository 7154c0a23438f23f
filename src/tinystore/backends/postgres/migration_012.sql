-- 012: each attempt's start, end and error, for an operator's page (show, the dashboard): the last 20
-- attempts of a job (KEPT_ATTEMPTS in _engine/leases.py), written as the attempt settles, and removed
-- with the job.
CREATE TABLE {schema}.attempts (
    job     bigint NOT NULL,
    attempt integer NOT NULL,
    began   double precision,
    ended   double precision NOT NULL,
    error   text,
    PRIMARY KEY (job, attempt)
);
