"""holdfs: a FUSE file system that keeps only what was synced when the power is cut.

    python holdfs.py LIVE MOUNT

mounts the folder LIVE at MOUNT (a passthrough: every process sees every write
at once, as through a page cache) and remembers what a power cut would keep:

- a file's contents as of its last ``fsync`` or ``fdatasync`` (both sync
  data and size), and
- a folder's entries (names, and which file or folder each names) as of its
  last ``fsync`` of the folder itself: a file created, deleted or renamed
  since is not, or still is, there after a cut, whatever its data.

Modes and owners are kept at once (a cut does not undo ``chmod``). Hard links,
symbolic links and special files are refused; locks are the kernel's.

A line ``cut`` on standard input is the power cut: from then on every
operation fails with EIO, LIVE is replaced by what was synced (files and
folders made anew, so their inode numbers change, as in a copy restored from a
backup) and the daemon answers one line of JSON (what it dropped). Unmount it
then (``fusermount -u MOUNT``): the kernel's cache of it goes too. Mount it
again to go on from what survived.

How it knows: each file and folder seen is a *node* (a number of its own: the
kernel reuses inode numbers). The first write, truncation or removal of a file
since the mount copies what it held to ``LIVE.synced/<node>``, its synced
contents, and every page written since is marked; ``fsync`` copies the marked
pages and the size there. A file made since the mount starts there empty.
A folder's synced entries are a map of names to nodes, read from LIVE at mount
and again at each of its syncs. On a cut the tree is built again from the
root's synced entries, each file from its synced copy, or from LIVE where it
was never changed.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import sys
import threading
from typing import Any, Optional

from fuse import FUSE, FuseOSError, fuse_get_context

PAGE = 4096
STAT_KEYS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime", "st_ctime",
             "st_blocks")
ROOT = 0


class HoldFS:
    use_ns = True  # times in nanoseconds (fusepy)

    def __init__(self, live: str):
        self.live = live
        self.synced_dir = live + ".synced"
        shutil.rmtree(self.synced_dir, ignore_errors=True)
        os.mkdir(self.synced_dir, 0o700)
        self.mutex = threading.RLock()  # one operation at a time: the cut waits for the one under way
        self.is_cut = False
        self.nodes = 0
        self.node_of_ino: dict[int, int] = {}  # a live inode number -> its node
        self.is_dir: dict[int, bool] = {}
        self.dir_meta: dict[int, tuple[int, int, int]] = {}  # a folder's node -> mode, uid, gid
        self.entries: dict[int, dict[str, int]] = {}  # a folder's node -> its synced entries
        self.copied: set[int] = set()  # nodes whose synced contents are in synced_dir (else: LIVE's, unchanged)
        self.dirty: dict[int, set[int]] = {}  # a node -> the pages written since its last sync
        self.open_files: dict[int, int] = {}  # a file handle (LIVE's descriptor) -> its node
        self._scan()

    # What the mount begins with: all of it synced

    def _scan(self) -> None:
        self._new_node(os.lstat(self.live))
        for folder, dirs, files in os.walk(self.live):
            names = {}
            for name in dirs + files:
                st = os.lstat(os.path.join(folder, name))
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    raise SystemExit(f"holdfs keeps files and folders only: {os.path.join(folder, name)}")
                names[name] = self._new_node(st)
            self.entries[self._node(folder)] = names

    def _new_node(self, st: os.stat_result) -> int:
        node = self.nodes
        self.nodes += 1
        self.node_of_ino[st.st_ino] = node
        self.is_dir[node] = stat.S_ISDIR(st.st_mode)
        if self.is_dir[node]:
            self.dir_meta[node] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
        return node

    def _node(self, real: str) -> int:
        ino = os.lstat(real).st_ino
        if ino not in self.node_of_ino:
            raise FuseOSError(errno.EIO)  # made behind the mount's back: nothing to keep it by
        return self.node_of_ino[ino]

    def _real(self, path: str) -> str:
        return self.live + path

    def _synced(self, node: int) -> str:
        return os.path.join(self.synced_dir, str(node))

    # The operations (fusepy calls the object with the operation's name)

    def __call__(self, op: str, *args: Any) -> Any:
        with self.mutex:
            if self.is_cut:
                raise FuseOSError(errno.EIO)
            return getattr(self, op)(*args)

    def getattr(self, path: str, fi: Any = None) -> dict[str, Any]:
        st = os.fstat(fi.fh) if fi else os.lstat(self._real(path))  # (no file: fusepy gives a null pointer)
        return {key: getattr(st, key) for key in STAT_KEYS} | {
            "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", ".."] + os.listdir(self._real(path))

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._real(path))
        return {key: getattr(sv, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                   "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def chmod(self, path: str, mode: int) -> None:
        real = self._real(path)
        os.chmod(real, mode)
        self._meta_changed(real)

    def chown(self, path: str, uid: int, gid: int) -> None:
        real = self._real(path)
        os.chown(real, uid, gid)
        self._meta_changed(real)

    def _meta_changed(self, real: str) -> None:
        node, st = self._node(real), os.lstat(real)
        if self.is_dir[node]:
            self.dir_meta[node] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
        elif node in self.copied:
            os.chmod(self._synced(node), stat.S_IMODE(st.st_mode))
            os.chown(self._synced(node), st.st_uid, st.st_gid)

    def utimens(self, path: str, times: Optional[tuple[int, int]] = None) -> None:
        os.utime(self._real(path), ns=times)

    def mkdir(self, path: str, mode: int) -> None:
        real = self._real(path)
        os.mkdir(real, mode)
        self._own(real)
        self.entries[self._new_node(os.lstat(real))] = {}  # synced with no entries: none yet

    def rmdir(self, path: str) -> None:
        real = self._real(path)
        ino = os.lstat(real).st_ino
        os.rmdir(real)
        self.node_of_ino.pop(ino, None)

    def create(self, path: str, mode: int, fi: Any) -> None:
        real = self._real(path)
        fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        self._own(real)
        st = os.fstat(fd)
        node = self._new_node(st)
        with open(self._synced(node), "wb"):  # synced, it is empty
            pass
        os.chmod(self._synced(node), stat.S_IMODE(st.st_mode))
        os.chown(self._synced(node), st.st_uid, st.st_gid)
        self.copied.add(node)
        self._opened(fd, node, fi)

    def open(self, path: str, fi: Any) -> None:
        real = self._real(path)
        node = self._node(real)
        if fi.flags & os.O_TRUNC:  # (the kernel leaves it to the open)
            self._truncate(node, real, 0)
        # LIVE's descriptor reads and writes whatever the open asked for (the kernel checked that);
        # appends come with their offsets from the kernel.
        self._opened(os.open(real, os.O_RDWR), node, fi)

    def _opened(self, fd: int, node: int, fi: Any) -> None:
        self.open_files[fd] = node
        fi.fh = fd
        fi.keep_cache = 1  # every change comes through this mount: the kernel's cache of a file stays right

    def release(self, path: Optional[str], fi: Any) -> None:
        os.close(fi.fh)
        del self.open_files[fi.fh]

    def read(self, path: Optional[str], size: int, offset: int, fi: Any) -> bytes:
        return os.pread(fi.fh, size, offset)

    def write(self, path: Optional[str], data: bytes, offset: int, fi: Any) -> int:
        node = self.open_files[fi.fh]
        self._keep_synced(node, fi.fh)
        written = os.pwrite(fi.fh, data, offset)
        if written:
            self.dirty.setdefault(node, set()).update(range(offset // PAGE, (offset + written - 1) // PAGE + 1))
        return written

    def truncate(self, path: Optional[str], length: int, fi: Any = None) -> None:
        if fi is not None:
            self._truncate(self.open_files[fi.fh], fi.fh, length)
        else:
            real = self._real(path)
            self._truncate(self._node(real), real, length)

    def _truncate(self, node: int, file: "int | str", length: int) -> None:
        old = os.stat(file).st_size
        self._keep_synced(node, file)
        os.truncate(file, length)
        pages = self.dirty.setdefault(node, set())  # a size to sync, even where no page changed
        if length < old:  # pages cut off read as zeros if the file grows again
            pages.update(range(length // PAGE, (old - 1) // PAGE + 1))

    def fsync(self, path: Optional[str], datasync: int, fi: Any) -> None:
        node = self.open_files[fi.fh]
        pages = self.dirty.pop(node, None)
        if pages is None:
            return
        size = os.fstat(fi.fh).st_size
        out = os.open(self._synced(node), os.O_WRONLY)
        try:
            for first, count in _runs(sorted(p for p in pages if p * PAGE < size)):
                data = os.pread(fi.fh, count * PAGE, first * PAGE)
                os.pwrite(out, data, first * PAGE)
            os.ftruncate(out, size)
        finally:
            os.close(out)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        real = self._real(path)
        self.entries[self._node(real)] = {name: self._node(os.path.join(real, name)) for name in os.listdir(real)}

    def unlink(self, path: str) -> None:
        real = self._real(path)
        node = self._node(real)
        self._keep_synced(node, real)
        ino = os.lstat(real).st_ino
        os.unlink(real)
        self.node_of_ino.pop(ino, None)

    def rename(self, old: str, new: str) -> None:
        target = self._real(new)
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            self._keep_synced(self._node(target), target)
        os.rename(self._real(old), target)
        if st is not None:
            self.node_of_ino.pop(st.st_ino, None)

    def _own(self, real: str) -> None:
        uid, gid, _ = fuse_get_context()
        os.chown(real, uid, gid)

    def _keep_synced(self, node: int, file: "int | str") -> None:
        """Before a file changes, or its name goes, keep what it held since the mount (its synced contents)."""
        if node in self.copied:
            return
        fd = file if isinstance(file, int) else os.open(file, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            out = os.open(self._synced(node), os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(st.st_mode))
            try:
                done = 0
                while done < st.st_size:
                    copied = os.copy_file_range(fd, out, st.st_size - done, done, done)
                    if not copied:
                        break
                    done += copied
                os.fchown(out, st.st_uid, st.st_gid)
            finally:
                os.close(out)
        finally:
            if fd is not file:
                os.close(fd)
        self.copied.add(node)

    # The cut

    def cut(self) -> dict[str, int]:
        """Drop what was not synced: LIVE becomes the synced tree. Every operation fails from now on."""
        with self.mutex:
            self.is_cut = True
            dropped = {"files_with_unsynced_writes": len(self.dirty),
                       "unsynced_pages": sum(len(pages) for pages in self.dirty.values())}
            live_paths = {}  # node -> where LIVE has it now, for the files never changed
            for folder, dirs, files in os.walk(self.live):
                for name in files:
                    node = self.node_of_ino.get(os.lstat(os.path.join(folder, name)).st_ino)
                    if node is not None:
                        live_paths[node] = os.path.join(folder, name)
            rebuilt = self.live + ".rebuilt"
            shutil.rmtree(rebuilt, ignore_errors=True)
            mode, uid, gid = self.dir_meta[ROOT]
            os.mkdir(rebuilt, mode)
            os.chown(rebuilt, uid, gid)
            self._build(ROOT, rebuilt, live_paths, (ROOT,))
            shutil.rmtree(self.live)
            os.rename(rebuilt, self.live)
            shutil.rmtree(self.synced_dir)
            return dropped

    def _build(self, folder_node: int, folder: str, live_paths: dict[int, str], path: tuple[int, ...]) -> None:
        for name, node in self.entries.get(folder_node, {}).items():
            out = os.path.join(folder, name)
            if self.is_dir[node]:
                if node in path:  # a folder synced inside its own subtree (moved there): keep it once
                    continue
                mode, uid, gid = self.dir_meta[node]
                os.mkdir(out, mode)
                os.chown(out, uid, gid)
                self._build(node, out, live_paths, path + (node,))
            else:
                source = self._synced(node) if node in self.copied else live_paths[node]
                shutil.copyfile(source, out)
                st = os.stat(source)
                os.chmod(out, stat.S_IMODE(st.st_mode))
                os.chown(out, st.st_uid, st.st_gid)


def _runs(pages: list[int]) -> list[tuple[int, int]]:
    """Sorted page numbers as (first, count) runs of consecutive pages, at most 256 pages (1 MiB) each."""
    runs: list[tuple[int, int]] = []
    for page in pages:
        if runs and runs[-1][0] + runs[-1][1] == page and runs[-1][1] < 256:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((page, 1))
    return runs


def _control(fs: HoldFS) -> None:
    """Read commands on standard input: ``cut`` answers one line of JSON once the cut is done."""
    for line in sys.stdin:
        if line.strip() == "cut":
            try:
                answer = fs.cut()
            except Exception as exc:  # said to the rig, which fails the test with it
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)


def main() -> None:
    live, mount = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.umask(0)  # the modes asked for come from the kernel with the caller's umask applied
    fs = HoldFS(live)
    threading.Thread(target=_control, args=(fs,), daemon=True).start()
    # allow_other: the PostgreSQL server runs as its own user; default_permissions: the kernel checks modes;
    # hard_remove: a file deleted while open is deleted (not renamed to a hidden name until closed).
    FUSE(fs, mount, raw_fi=True, foreground=True, allow_other=True, default_permissions=True, use_ino=True,
         hard_remove=True, fsname="holdfs")


if __name__ == "__main__":
    main()
