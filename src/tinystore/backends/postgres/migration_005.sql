-- 005: claims and settlements of many processes at once (see _writer) never wait for each other's row of
-- the per-minute counts: a row per queue, minute and session (part: the writer's backend pid), summed by
-- readers. The rows counted so far are part 0.
ALTER TABLE {schema}.counts ADD COLUMN part integer NOT NULL DEFAULT 0;
ALTER TABLE {schema}.counts DROP CONSTRAINT counts_pkey;
ALTER TABLE {schema}.counts ADD PRIMARY KEY (queue, minute, part);
