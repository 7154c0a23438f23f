"""A store for tests (``tinystore.open(":memory:")``): a SQLite store whose file nobody else sees.

SQLite's own ``:memory:`` database is one connection's, and a store needs
several (its writer, readers, a worker's threads), so the store is a file
in a private folder made for it (``tempfile.mkdtemp``: mode 0700, under
``TMPDIR``), with durability off: nothing is synced to the disk, what the
system keeps in memory is all there is. Every contract but durability
holds, workers of the same process serve it, and ``close`` removes the
folder and everything in it. A process killed before its close leaves the
folder behind (``tinystore-memory-*`` in the temporary folder).
"""

from __future__ import annotations

import os
import shutil
import tempfile

from . import SQLiteBackend

MEMORY = ":memory:"  # what a store in memory is shown as


class MemoryBackend(SQLiteBackend):
    def __init__(self, lock_timeout: float):
        self.folder = tempfile.mkdtemp(prefix="tinystore-memory-")
        try:
            super().__init__(os.path.join(self.folder, "store.db"), "off", lock_timeout)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.location = MEMORY

    def close(self) -> None:
        try:
            super().close()
        finally:
            if not self.forked():  # a forked child's copy: the folder is the parent's
                shutil.rmtree(self.folder, ignore_errors=True)
