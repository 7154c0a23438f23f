"""Power cuts: what tinystore acknowledged is on the disk, proven on a disk that drops everything not synced.

A SIGKILL leaves the kernel's page cache whole, so the crash tests cannot
tell a commit that reached the disk from one that reached the cache. Here
the store (SQLite: its file; PostgreSQL: the server's data directory) is on
holdfs, which drops at a cut every write that was not fsynced, and every
name created, removed or renamed in a folder that was not fsynced since
(see ``holdfs.py`` and ``power.py``). Each test runs a mode of
``child.py`` and cuts the power a few times at random moments; after each
cut a fresh process reads the store and compares it with the witness, an
fsynced file on the machine's own disk.

The control (``durability="normal"``) must lose acknowledged writes: the
proof that a cut here loses what a real one would. ``python -m
tests.powercut.run`` cuts many more times (docs/reliability.md, "Power cuts").
Without FUSE (or, for PostgreSQL, without its binaries) the tests skip,
saying why, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

import power

SEED = 7


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the power-cut tests must run in CI, and cannot here: {reason}")
    pytest.skip(f"no power cuts here: {reason}")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def rig(request: pytest.FixtureRequest) -> Iterator[power.Rig]:
    """One disk (and for PostgreSQL one server on it) for every test of a backend; a queue for each mode."""
    reason = power.fuse_missing() or (power.server_missing() if request.param == "postgres" else None)
    if reason:
        unavailable(reason)
    # Not pytest's tmp_path: the server's user must pass through every folder above its data directory.
    folder = Path(tempfile.mkdtemp(prefix="tinystore-powercut-"))
    rig = power.Rig(folder, request.param, SEED)
    failed = request.session.testsfailed
    try:
        rig.start()
    except RuntimeError as exc:
        rig.close()
        unavailable(str(exc))
    yield rig
    rig.close()
    if request.session.testsfailed == failed:
        shutil.rmtree(folder)  # a failure keeps the files: children's logs, witnesses, server log


def nothing_lost(tally: power.Tally, rig: power.Rig) -> None:
    assert tally.acknowledged > 0, tally.line()
    assert not tally.lost, f"{tally.line()}: {sorted(tally.lost)[:10]} (files in {rig.folder})"


def test_DUR_01_every_add_acknowledged_before_a_power_cut_is_there_after_it(rig: power.Rig) -> None:
    nothing_lost(rig.run("add", cuts=2), rig)


def test_DUR_01_every_job_of_an_acknowledged_add_many_is_there_after_a_power_cut(rig: power.Rig) -> None:
    nothing_lost(rig.run("add_many", cuts=2), rig)


def test_DUR_01_adds_acknowledged_to_four_threads_at_once_are_there_after_a_power_cut(rig: power.Rig) -> None:
    nothing_lost(rig.run("threads", cuts=2), rig)


def test_JOB_02_a_committed_transaction_keeps_its_row_and_its_job_through_a_power_cut_and_no_cut_splits_them(
        rig: power.Rig) -> None:
    tally = rig.run("transaction", cuts=2)
    nothing_lost(tally, rig)
    assert not tally.torn, f"a job without its row, or a row without its job: {sorted(tally.torn)[:10]}"


def test_DUR_01_a_job_seen_done_is_still_done_after_a_power_cut(rig: power.Rig) -> None:
    nothing_lost(rig.run("settle", cuts=2), rig)


def test_JOB_04_an_attempt_whose_handler_began_is_still_counted_after_a_power_cut(rig: power.Rig) -> None:
    nothing_lost(rig.run("job04", cuts=3), rig)


def test_the_control_with_durability_normal_loses_acknowledged_adds_in_most_cuts(rig: power.Rig) -> None:
    """Were this to lose nothing, the rig would not be cutting anything a real cut does, and the tests above
    would prove nothing."""
    tally = rig.run("control", cuts=3)
    assert tally.cuts_that_lost >= 2, tally.line()
    assert tally.dropped_pages > 0, tally.line()


def test_holdfs_keeps_what_was_synced_and_drops_the_rest(tmp_path: Path) -> None:
    reason = power.fuse_missing()
    if reason:
        unavailable(reason)
    disk = power.Disk(tmp_path)
    disk.attach()
    try:
        mnt = disk.mount
        (mnt / "unsynced").write_text("lost")
        with open(mnt / "synced", "w") as f:
            f.write("kept")
            f.flush()
            os.fsync(f.fileno())
            f.write(" and not this")
        with open(mnt / "shrunk", "w") as f:
            f.write("x" * 10_000)
            f.flush()
            os.fsync(f.fileno())
        os.truncate(mnt / "shrunk", 10)
        os.mkdir(mnt / "folder")
        sync_folder(mnt)
        with open(mnt / "folder" / "named_only_in_a_folder_never_synced", "w") as f:
            f.write("data")
            os.fsync(f.fileno())
        os.rename(mnt / "synced", mnt / "renamed")  # the rename is not synced: the old name stays
        os.unlink(mnt / "shrunk")  # nor the deletion
        answer = disk.cut()
    finally:
        disk.detach()
    assert answer["unsynced_pages"] > 0
    live = disk.live
    assert sorted(p.name for p in live.iterdir()) == ["folder", "shrunk", "synced", "unsynced"]
    assert (live / "unsynced").read_text() == ""  # its name was synced with the folder, its data never
    assert (live / "synced").read_text() == "kept"
    assert (live / "shrunk").read_text() == "x" * 10_000
    assert list((live / "folder").iterdir()) == []


def sync_folder(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
