"""tinystore: a durable job queue in your SQLite file.

A job commits with the application's rows, survives every restart the file
survives, and runs at least once. The package's modules:

- ``_store``       open(), Store: queues, transactions, serving, operations
- ``_context``     Context: what the modules below Store are handed (backend, clock, owner, notices)
- ``_dead``        looking again for a dead process as its grace ends (PostgreSQL, DUR-03)
- ``_queue``       Queue: add, get, cancel, retry, jobs, watch, work
- ``_awaiting``    each call written once, as steps that a sync caller waits for and an ``_async`` twin awaits
- ``_lanes``       the thread of its own that one ``transaction_async()`` runs on
- ``_worker``      Worker: one event loop for its queues' runners, notices, liveness, shutdown
- ``_runner``      QueueRunner: one queue's claim cycles, and the attempts they start and end
- ``_attempt``     the worker's record of one attempt; ``_ending`` what its end means; ``_deadlines`` timeouts
- ``_budget``, ``_threads``   the threads that run ``def`` handlers for a worker, handed out in turn
- ``_renewals``    lease renewals on a thread of the worker's own; ``_stalls`` hears a blocked loop
- ``_report``      a serving worker's line per queue now and then
- ``_run``         Run / AsyncRun: steps, run.transaction, progress, answers
- ``_settle``      what an ended attempt does to its job (backoff, attempts, a repeating job's next time)
- ``_repeat``      repeat rules: ``cron`` text in a zone, ``every`` a duration
- ``_watch``       watchers, one reader per store
- ``_notify``      the backend's notices of commits, told to every worker and watcher
- ``_outage``      background tasks riding out a store that cannot be written for a while
- ``_batch``       Batch and BatchState: jobs of any queues, and the then job once they have all ended
- ``_jobstate``    JobState (what you read of a job) and Job (what you give add_many)
- ``_options``, ``_durations``, ``_values``   checking what users give (``QueueOptionArgs``: the queue options' types)
- ``_clock``       the one clock; ``testing.FakeClock`` replaces it
- ``_errors``      the error tree
- ``_events``      what the core tells an observer of its jobs (``metrics``), and the fields of log records about a job
- ``backends/``    the backend interface (``_base``), the one place that picks a backend, and SQLite
- ``cli/``         the ``tinystore`` command
- ``metrics/``     Prometheus text and OpenTelemetry metrics of a store's jobs, enabled with ``metrics.enable``
"""

import logging

from ._answers import Fail, Retry, Snooze
from ._batch import Batch, BatchState
from ._clock import Clock
from ._errors import (Closed, Conflict, DiskError, DiskFull, Error, InvalidArgument, LimitExceeded, Locked, ReadOnly,
                      StoreCorrupt, StoreGone, Unavailable)
from ._jobstate import Job, JobState, JobStateName
from ._options import QueueOptionArgs
from ._queue import Queue
from ._repeat import Cron, Every, Repeat, cron, every
from ._run import AsyncRun, Run
from ._store import Store, open
from ._transaction import AsyncTransaction, Transaction
from ._version import __version__ as __version__  # "as": a name this package gives (for type checkers)

# A library logs, the application decides where to: nothing is printed unless logging is configured
# (the ``tinystore worker`` command configures it).
logging.getLogger("tinystore").addHandler(logging.NullHandler())

__all__ = [
    "AsyncRun", "AsyncTransaction", "Batch", "BatchState", "Clock", "Closed", "Conflict", "Cron", "DiskError", "DiskFull", "Error",
    "Every", "Fail", "InvalidArgument", "Job", "JobState", "JobStateName", "LimitExceeded", "Locked", "Queue",
    "QueueOptionArgs", "ReadOnly", "Repeat", "Retry", "Run", "Snooze", "Store", "StoreCorrupt", "StoreGone",
    "Transaction", "Unavailable", "cron", "every", "open",
]
