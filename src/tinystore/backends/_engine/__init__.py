"""The engine: tinystore's algorithm over a store's tables, written once for every backend.

It runs over an ``Executor`` (``executor``): one connection in one
transaction, running named statements whose texts each backend gives (the
shared ``queries.sql``, and the backend's own file for what differs; see
``statements``). A backend gives its connections, its statement texts, its
commit loop, and what only it has (liveness, hearing other processes,
migrations, a file's or a server's safety); the engine gives the rest:

- ``claim``: claims under every limit (concurrency, group_concurrency, rate,
  group_rate), the one claim path;
- ``groups``: a group's running count, head and room; groups set aside and woken;
- ``leases``: settlements applied, leases that ran out, a dead process's leases;
- ``jobs``: adds, declarations, removals;
- ``work``: the other writes (a claim cycle, cancel, retry, renew, progress,
  steps, run.transaction's lease check);
- ``bulk``: a chunk of cancel_many or retry_many, one bounded transaction;
- ``reads``: get, ahead, jobs, stats, detail, watched.
"""
