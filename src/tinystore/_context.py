"""What the modules below ``Store`` share, handed to each of them: one small object, not the Store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ._clock import Clock
from ._dead import DeadLooks
from ._errors import Closed
from ._events import Events
from ._notify import Notices
from ._outage import Outages
from .backends._base import Backend


@dataclass
class Context:
    """The backend a store talks to, its clock, this process's registration (``owner``, which every
    lease names), the notices of its commits, the outages its background tasks ride out, its looks for
    dead processes (``_dead``), and who observes its jobs (``_events``; None when nobody does)."""

    backend: Backend
    clock: Clock
    owner: int
    notices: Notices
    outages: Outages
    looks: DeadLooks
    closed: bool = False
    events: Optional[Events] = None

    def check_open(self) -> None:
        if self.closed:
            raise Closed(f"the store {self.backend.location!r} is closed")
