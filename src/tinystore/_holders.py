"""Whether the process holding a running job's lease is gone, as an operator's page says it.

A lease names its holder's registration (pid and host). The holder is gone
where its registration is gone (it closed, or a look found it dead), where
its lease ran out (the next claim takes the job over), or where it ran on
this machine and no process of its pid runs here now. A holder that died on
another machine is seen gone once its lease runs out, or once a worker's look
ends its leases (DUR-03); until then its lease is shown as held.
"""

from __future__ import annotations

import os
import socket
from typing import Optional

from .backends._base import Lease


def holder_gone(lease: Lease, now: float) -> Optional[str]:
    """Why the holder of ``lease`` is gone, in words; None where it may still be running the job."""
    if lease.pid is None:
        return "its process has left the store: the next claim takes the job over"
    if lease.expires <= now:
        return (f"its lease ran out {now - lease.expires:.1f}s ago without a renewal: pid {lease.pid} on "
                f"{lease.host} stopped running it, and the next claim takes the job over")
    if lease.host == socket.gethostname() and not _runs(lease.pid):
        return (f"no process {lease.pid} runs on this host ({lease.host}): the job goes to the next claim once a "
                f"worker finds the process dead, or once its lease runs out")
    return None


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: a process of another user has that pid
        return True
    return True
