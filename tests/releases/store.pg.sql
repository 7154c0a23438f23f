--
-- PostgreSQL database dump
--

\restrict 64mQK075N7GqF4kETaot5IugnoOMBCOVwfrXuuXqYUZtk3gAtwpSO0z56ienOI7

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: tinystore; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA tinystore;


--
-- Name: job_changed(); Type: FUNCTION; Schema: tinystore; Owner: -
--

CREATE FUNCTION tinystore.job_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM "tinystore".watched WHERE job = OLD.seq) THEN
            INSERT INTO "tinystore".changes (job, state, at, attempt, error, progress)
            VALUES (OLD.seq, NULL, OLD.at, OLD.attempt, OLD.error, NULL);
            PERFORM pg_notify(TG_ARGV[0], json_build_object('w', OLD.seq)::text);
        END IF;
        RETURN OLD;
    END IF;
    IF EXISTS (SELECT 1 FROM "tinystore".watched WHERE job = NEW.seq) THEN
        INSERT INTO "tinystore".changes (job, state, at, attempt, error, progress)
        VALUES (NEW.seq, NEW.state, NEW.at, NEW.attempt, NEW.error, NEW.progress);
        PERFORM pg_notify(TG_ARGV[0], json_build_object('w', NEW.seq)::text);
    END IF;
    RETURN NEW;
END
$$;


--
-- Name: jobs_counted(); Type: FUNCTION; Schema: tinystore; Owner: -
--

CREATE FUNCTION tinystore.jobs_counted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO "tinystore".count_changes (queue, queued, running, done, failed, repeating)
        SELECT queue, count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),
               count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE state = 'failed'), count(repeat)
        FROM after_rows GROUP BY queue;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO "tinystore".count_changes (queue, queued, running, done, failed, repeating)
        SELECT queue, -count(*) FILTER (WHERE state = 'queued'), -count(*) FILTER (WHERE state = 'running'),
               -count(*) FILTER (WHERE state = 'done'), -count(*) FILTER (WHERE state = 'failed'), -count(repeat)
        FROM before_rows GROUP BY queue;
    ELSE  -- a progress or a step changes no state: nothing is appended
        INSERT INTO "tinystore".count_changes (queue, queued, running, done, failed, repeating)
        SELECT * FROM (
            SELECT queue, sum(n * (state = 'queued')::int) AS queued, sum(n * (state = 'running')::int) AS running,
                   sum(n * (state = 'done')::int) AS done, sum(n * (state = 'failed')::int) AS failed,
                   sum(n * (repeat IS NOT NULL)::int) AS repeating
            FROM (SELECT queue, state, repeat, 1 AS n FROM after_rows
                  UNION ALL SELECT queue, state, repeat, -1 FROM before_rows) AS rows
            GROUP BY queue
        ) AS d
        WHERE (d.queued, d.running, d.done, d.failed, d.repeating) <> (0, 0, 0, 0, 0);
    END IF;
    RETURN NULL;
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: batches; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.batches (
    id text NOT NULL COLLATE pg_catalog."C",
    then_queue text NOT NULL COLLATE pg_catalog."C",
    then_payload text NOT NULL,
    then_grp text COLLATE pg_catalog."C",
    then_priority smallint DEFAULT 0 NOT NULL,
    created_at double precision NOT NULL,
    closed_at double precision,
    total bigint DEFAULT 0 NOT NULL,
    done bigint DEFAULT 0 NOT NULL,
    failed bigint DEFAULT 0 NOT NULL,
    cancelled bigint DEFAULT 0 NOT NULL,
    then_seq bigint
);


--
-- Name: cancelled; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.cancelled (
    job bigint NOT NULL,
    at double precision NOT NULL
);


--
-- Name: changes; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.changes (
    id bigint NOT NULL,
    job bigint NOT NULL,
    state text,
    at double precision NOT NULL,
    attempt integer NOT NULL,
    error text,
    progress text
);


--
-- Name: changes_id_seq; Type: SEQUENCE; Schema: tinystore; Owner: -
--

ALTER TABLE tinystore.changes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME tinystore.changes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: count_changes; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.count_changes (
    queue text NOT NULL COLLATE pg_catalog."C",
    queued bigint NOT NULL,
    running bigint NOT NULL,
    done bigint NOT NULL,
    failed bigint NOT NULL,
    repeating bigint NOT NULL
);


--
-- Name: counts; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.counts (
    queue text NOT NULL COLLATE pg_catalog."C",
    minute bigint NOT NULL,
    started integer DEFAULT 0 NOT NULL,
    done integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    part integer DEFAULT 0 NOT NULL
);


--
-- Name: groups; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.groups (
    queue text NOT NULL COLLATE pg_catalog."C",
    grp text NOT NULL COLLATE pg_catalog."C",
    running integer DEFAULT 0 NOT NULL,
    head_at double precision,
    head_seq bigint,
    ready boolean DEFAULT true NOT NULL,
    wake_at double precision,
    top_priority smallint DEFAULT 0 NOT NULL
);


--
-- Name: jobs; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.jobs (
    seq bigint NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    id text NOT NULL COLLATE pg_catalog."C",
    payload text NOT NULL,
    grp text COLLATE pg_catalog."C",
    state text NOT NULL,
    at double precision NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    error text,
    progress text,
    expires double precision,
    result text,
    repeat text,
    priority smallint DEFAULT 0 NOT NULL,
    batch text COLLATE pg_catalog."C"
);


--
-- Name: jobs_seq_seq; Type: SEQUENCE; Schema: tinystore; Owner: -
--

ALTER TABLE tinystore.jobs ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME tinystore.jobs_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: leases; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.leases (
    job bigint NOT NULL,
    attempt integer NOT NULL,
    queue text NOT NULL COLLATE pg_catalog."C",
    owner integer NOT NULL,
    expires double precision NOT NULL
);


--
-- Name: migrations; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.migrations (
    version integer NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: processes; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.processes (
    id integer NOT NULL,
    pid integer NOT NULL,
    host text NOT NULL,
    started double precision NOT NULL,
    seen double precision NOT NULL,
    alive timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: processes_id_seq; Type: SEQUENCE; Schema: tinystore; Owner: -
--

ALTER TABLE tinystore.processes ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME tinystore.processes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: queue_counts; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.queue_counts (
    queue text NOT NULL COLLATE pg_catalog."C",
    queued bigint NOT NULL,
    running bigint NOT NULL,
    done bigint NOT NULL,
    failed bigint NOT NULL,
    repeating bigint NOT NULL
);


--
-- Name: queues; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.queues (
    name text NOT NULL COLLATE pg_catalog."C",
    options text NOT NULL
);


--
-- Name: starts; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.starts (
    queue text NOT NULL COLLATE pg_catalog."C",
    grp text COLLATE pg_catalog."C",
    t double precision NOT NULL
);


--
-- Name: steps; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.steps (
    job bigint NOT NULL,
    name text NOT NULL COLLATE pg_catalog."C",
    attempt integer NOT NULL,
    answer text NOT NULL
);


--
-- Name: watched; Type: TABLE; Schema: tinystore; Owner: -
--

CREATE TABLE tinystore.watched (
    job bigint NOT NULL,
    owner integer NOT NULL
);


--
-- Data for Name: batches; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.batches (id, then_queue, then_payload, then_grp, then_priority, created_at, closed_at, total, done, failed, cancelled, then_seq) FROM stdin;
\.


--
-- Data for Name: cancelled; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.cancelled (job, at) FROM stdin;
9	1796521603.0817542
\.


--
-- Data for Name: changes; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.changes (id, job, state, at, attempt, error, progress) FROM stdin;
\.


--
-- Data for Name: count_changes; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.count_changes (queue, queued, running, done, failed, repeating) FROM stdin;
work	1	0	0	0	0
work	1	0	0	0	0
work	1	0	0	0	0
work	1	0	0	0	0
work	1	0	0	0	0
work	-1	0	0	0	0
held	-1	1	0	0	0
\.


--
-- Data for Name: counts; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.counts (queue, minute, started, done, failed, part) FROM stdin;
work	29942026	3	3	0	30203
failing	29942026	1	0	1	30203
held	29942026	1	0	0	30247
\.


--
-- Data for Name: groups; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.groups (queue, grp, running, head_at, head_seq, ready, wake_at, top_priority) FROM stdin;
\.


--
-- Data for Name: jobs; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.jobs (seq, queue, id, payload, grp, state, at, attempt, error, progress, expires, result, repeat, priority, batch) FROM stdin;
1	work	done:1	{"n":1}	\N	done	1796521602.6836243	1	\N	\N	2111881602.765956	\N	\N	0	\N
2	work	done:2	{"n":2}	\N	done	1796521602.6936152	1	\N	\N	2111881602.7659976	\N	\N	0	\N
3	work	done:3	{"n":3}	\N	done	1796521602.6974645	1	\N	\N	2111881602.7660158	\N	\N	0	\N
4	failing	failed:1	{"n":1}	\N	failed	1796521602.7054696	1	RuntimeError: failed in 0.1.0\nTraceback (most recent call last):\n  File "/tmp/tinystore-test-venvs/0.1.0-bcb70abe9ecf5de0/lib/python3.11/site-packages/tinystore/_threads.py", line 97, in _work\n    answer, exc = c.fn(*c.args), None\n                  ^^^^^^^^^^^^^\n  File "/tmp/tinystore-test-venvs/0.1.0-bcb70abe9ecf5de0/lib/python3.11/site-packages/tinystore/_runner.py", line 289, in _call\n    return self.handler(self.queue.decode(a.claimed.payload), a.run)\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/work/wt/pkg/tests/releases/make_stores.py", line 41, in fail\n    raise RuntimeError("failed in 0.1.0")\nRuntimeError: failed in 0.1.0\n	\N	2111881602.7675862	\N	\N	0	\N
5	work	waiting:1	{"n":1}	\N	queued	1796521603.0245442	0	\N	\N	\N	\N	\N	0	\N
6	work	waiting:2	{"n":2}	\N	queued	1796521603.0454195	0	\N	\N	\N	\N	\N	0	\N
7	work	waiting:3	{"n":3}	\N	queued	1796521603.0556512	0	\N	\N	\N	\N	\N	0	\N
8	work	scheduled:1	{"n":1}	\N	queued	4102444800	0	\N	\N	\N	\N	\N	0	\N
10	held	running:1	{"n":1}	\N	running	1796521603.124014	1	\N	\N	\N	\N	\N	0	\N
\.


--
-- Data for Name: leases; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.leases (job, attempt, queue, owner, expires) FROM stdin;
10	1	held	3	1796521633.9966443
\.


--
-- Data for Name: migrations; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.migrations (version, applied_at) FROM stdin;
1	2026-12-06 01:46:42.393299+00
2	2026-12-06 01:46:42.393299+00
3	2026-12-06 01:46:42.393299+00
4	2026-12-06 01:46:42.393299+00
5	2026-12-06 01:46:42.393299+00
6	2026-12-06 01:46:42.393299+00
7	2026-12-06 01:46:42.393299+00
8	2026-12-06 01:46:42.393299+00
9	2026-12-06 01:46:42.393299+00
10	2026-12-06 01:46:42.393299+00
\.


--
-- Data for Name: processes; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.processes (id, pid, host, started, seen, alive) FROM stdin;
3	30231	vm	1796521603.9489887	1796521603.9489887	2026-12-06 01:46:43.964133+00
\.


--
-- Data for Name: queue_counts; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.queue_counts (queue, queued, running, done, failed, repeating) FROM stdin;
work	0	0	3	0	0
failing	0	0	0	1	0
held	1	0	0	0	0
\.


--
-- Data for Name: queues; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.queues (name, options) FROM stdin;
work	{"concurrency": null, "rate": null, "group_concurrency": null, "group_rate": null, "attempts": 10, "backoff": [1.0, 3600.0], "timeout": 60.0, "lease": 30.0, "dedupe": 315360000.0, "keep": 315360000.0, "paused": false}
failing	{"concurrency": null, "rate": null, "group_concurrency": null, "group_rate": null, "attempts": 1, "backoff": [1.0, 3600.0], "timeout": 60.0, "lease": 30.0, "dedupe": 0.0, "keep": 315360000.0, "paused": false}
held	{"concurrency": null, "rate": null, "group_concurrency": null, "group_rate": null, "attempts": 10, "backoff": [1.0, 3600.0], "timeout": 60.0, "lease": 30.0, "dedupe": 0.0, "keep": 604800.0, "paused": false}
\.


--
-- Data for Name: starts; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.starts (queue, grp, t) FROM stdin;
\.


--
-- Data for Name: steps; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.steps (job, name, attempt, answer) FROM stdin;
\.


--
-- Data for Name: watched; Type: TABLE DATA; Schema: tinystore; Owner: -
--

COPY tinystore.watched (job, owner) FROM stdin;
\.


--
-- Name: changes_id_seq; Type: SEQUENCE SET; Schema: tinystore; Owner: -
--

SELECT pg_catalog.setval('tinystore.changes_id_seq', 1, false);


--
-- Name: jobs_seq_seq; Type: SEQUENCE SET; Schema: tinystore; Owner: -
--

SELECT pg_catalog.setval('tinystore.jobs_seq_seq', 10, true);


--
-- Name: processes_id_seq; Type: SEQUENCE SET; Schema: tinystore; Owner: -
--

SELECT pg_catalog.setval('tinystore.processes_id_seq', 3, true);


--
-- Name: batches batches_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (id);


--
-- Name: cancelled cancelled_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.cancelled
    ADD CONSTRAINT cancelled_pkey PRIMARY KEY (job);


--
-- Name: changes changes_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.changes
    ADD CONSTRAINT changes_pkey PRIMARY KEY (id);


--
-- Name: counts counts_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.counts
    ADD CONSTRAINT counts_pkey PRIMARY KEY (queue, minute, part);


--
-- Name: groups groups_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.groups
    ADD CONSTRAINT groups_pkey PRIMARY KEY (queue, grp);


--
-- Name: jobs jobs_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (seq);


--
-- Name: jobs jobs_queue_id_key; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.jobs
    ADD CONSTRAINT jobs_queue_id_key UNIQUE (queue, id);


--
-- Name: leases leases_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.leases
    ADD CONSTRAINT leases_pkey PRIMARY KEY (job);


--
-- Name: migrations migrations_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.migrations
    ADD CONSTRAINT migrations_pkey PRIMARY KEY (version);


--
-- Name: processes processes_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.processes
    ADD CONSTRAINT processes_pkey PRIMARY KEY (id);


--
-- Name: queue_counts queue_counts_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.queue_counts
    ADD CONSTRAINT queue_counts_pkey PRIMARY KEY (queue);


--
-- Name: queues queues_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.queues
    ADD CONSTRAINT queues_pkey PRIMARY KEY (name);


--
-- Name: steps steps_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.steps
    ADD CONSTRAINT steps_pkey PRIMARY KEY (job, name);


--
-- Name: watched watched_pkey; Type: CONSTRAINT; Schema: tinystore; Owner: -
--

ALTER TABLE ONLY tinystore.watched
    ADD CONSTRAINT watched_pkey PRIMARY KEY (job, owner);


--
-- Name: batches_then; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX batches_then ON tinystore.batches USING btree (then_seq) WHERE (then_seq IS NOT NULL);


--
-- Name: changes_job; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX changes_job ON tinystore.changes USING btree (job, id);


--
-- Name: count_changes_queue; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX count_changes_queue ON tinystore.count_changes USING btree (queue);


--
-- Name: groups_ready_priority; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX groups_ready_priority ON tinystore.groups USING btree (queue, top_priority, head_at, head_seq) WHERE (ready AND (head_at IS NOT NULL));


--
-- Name: groups_wake; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX groups_wake ON tinystore.groups USING btree (queue, wake_at) WHERE (wake_at IS NOT NULL);


--
-- Name: jobs_batch; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX jobs_batch ON tinystore.jobs USING btree (batch, state) WHERE (batch IS NOT NULL);


--
-- Name: jobs_due_priority; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX jobs_due_priority ON tinystore.jobs USING btree (queue, priority, at, seq) WHERE ((state = 'queued'::text) AND (grp IS NULL));


--
-- Name: jobs_expires; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX jobs_expires ON tinystore.jobs USING btree (expires) WHERE (expires IS NOT NULL);


--
-- Name: jobs_failed; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX jobs_failed ON tinystore.jobs USING btree (queue, id) WHERE (state = 'failed'::text);


--
-- Name: jobs_group; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX jobs_group ON tinystore.jobs USING btree (queue, grp, id) WHERE (grp IS NOT NULL);


--
-- Name: jobs_group_priority; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX jobs_group_priority ON tinystore.jobs USING btree (queue, grp, priority, at, seq) WHERE ((state = 'queued'::text) AND (grp IS NOT NULL));


--
-- Name: leases_owner; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX leases_owner ON tinystore.leases USING btree (owner);


--
-- Name: leases_queue; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX leases_queue ON tinystore.leases USING btree (queue, expires);


--
-- Name: starts_group; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX starts_group ON tinystore.starts USING btree (queue, grp, t) WHERE (grp IS NOT NULL);


--
-- Name: starts_queue; Type: INDEX; Schema: tinystore; Owner: -
--

CREATE INDEX starts_queue ON tinystore.starts USING btree (queue, t);


--
-- Name: jobs jobs_changed; Type: TRIGGER; Schema: tinystore; Owner: -
--

CREATE TRIGGER jobs_changed AFTER UPDATE OF state, at, attempt, error, progress ON tinystore.jobs FOR EACH ROW EXECUTE FUNCTION tinystore.job_changed('tinystore_7fc89a64_tinystore');


--
-- Name: jobs jobs_counted_in; Type: TRIGGER; Schema: tinystore; Owner: -
--

CREATE TRIGGER jobs_counted_in AFTER INSERT ON tinystore.jobs REFERENCING NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION tinystore.jobs_counted();


--
-- Name: jobs jobs_counted_moved; Type: TRIGGER; Schema: tinystore; Owner: -
--

CREATE TRIGGER jobs_counted_moved AFTER UPDATE ON tinystore.jobs REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows FOR EACH STATEMENT EXECUTE FUNCTION tinystore.jobs_counted();


--
-- Name: jobs jobs_counted_out; Type: TRIGGER; Schema: tinystore; Owner: -
--

CREATE TRIGGER jobs_counted_out AFTER DELETE ON tinystore.jobs REFERENCING OLD TABLE AS before_rows FOR EACH STATEMENT EXECUTE FUNCTION tinystore.jobs_counted();


--
-- Name: jobs jobs_left; Type: TRIGGER; Schema: tinystore; Owner: -
--

CREATE TRIGGER jobs_left AFTER DELETE ON tinystore.jobs FOR EACH ROW EXECUTE FUNCTION tinystore.job_changed('tinystore_7fc89a64_tinystore');


--
-- PostgreSQL database dump complete
--

\unrestrict 64mQK075N7GqF4kETaot5IugnoOMBCOVwfrXuuXqYUZtk3gAtwpSO0z56ienOI7

