-- 009: liveness with a grace (see _keeper). `alive` is when the process's keeper last said it lives, by the
-- server's clock, about every second: a process whose lock is gone is found dead only once `alive` is a
-- few seconds old, so that one whose sessions were ended for a moment (a network blip, a failover) is not
-- taken for dead while it connects again. `seen` is no longer written after the registration: a write of
-- the writer's to the row would hold up the heartbeat behind the writer's transaction.
ALTER TABLE {schema}.processes ADD COLUMN alive timestamptz NOT NULL DEFAULT now();
