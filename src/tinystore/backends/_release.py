"""What a store says about the releases that opened it: its schema version (the newest migration applied)
and the release that last opened it. A store whose schema version is beyond the newest this release knows
was made by a later release: it is refused before anything is written to it."""

from __future__ import annotations

from .._errors import Error
from .._version import __version__

RELEASE = __version__


def refuse_later(store: str, found: set[int], newest: int) -> None:
    """Raise where the store's migrations go beyond ``newest``, the last this release has."""
    version = max(found, default=0)
    if version > newest:
        raise Error(f"{store} has schema version {version}, from a later release of tinystore; this release "
                    f"({RELEASE}) knows schema versions up to {newest}: upgrade tinystore to open it "
                    f"(the store was left as it was; a downgrade is not supported)")
