"""Backends: the databases a store can live in, behind one interface (``_base.Backend``).

``open_backend`` is the one place that picks a backend from what the user
gave ``tinystore.open``: a file path is a SQLite store (``sqlite/``); a
``postgresql://`` URL is refused until that backend exists.
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import Error, InvalidArgument
from ._base import Backend

URL_SCHEMES = ("postgresql://", "postgres://")


def open_backend(target: "str | os.PathLike[str]", *, durability: str, lock_timeout: float) -> Backend:
    """The backend for ``target``: a SQLite file path (created where absent), or a database URL."""
    if isinstance(target, str) and target.startswith(URL_SCHEMES):
        raise InvalidArgument("this version of tinystore stores jobs in SQLite files only; give a file path")
    path = _path(target)
    from .sqlite import SQLiteBackend  # imported here: a backend's driver loads only when it is used
    try:
        return SQLiteBackend(path, durability, lock_timeout)
    except OSError as exc:  # what the checks before any write could not foresee: a race, no space, no descriptors
        where = f" ({exc.filename})" if exc.filename and exc.filename != os.path.abspath(path) else ""
        raise Error(f"cannot open the store {os.path.abspath(path)}: {exc.strerror or exc}{where}") from exc


def _path(target: Any) -> str:
    try:
        path = os.fspath(target)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path or "\0" in path:
        raise InvalidArgument(f"the store's path must be a file path, not {target!r}")
    return path
