"""Many power cuts, for each mode and backend, and a table of what they lost.

    python -m tests.powercut.run                          # 25 cuts of every mode, on both backends
    python -m tests.powercut.run --cuts 10 --seed 3 --backend sqlite --mode job04 --mode control
    python -m tests.powercut.run --keep                   # keep the rig's folders (witnesses, logs)

Each backend gets one disk (and for PostgreSQL one server on it); each mode
its queue and witness (see ``power.py`` and ``child.py``). It prints a
Markdown table, and exits 1 when a mode other than the control lost an
acknowledged write (or the control lost none: the rig would then prove
nothing), 2 when the rig could not run here.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import power  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuts", type=int, default=25)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--mode", action="append", choices=power.MODES, help="(repeat it) every mode unless given")
    parser.add_argument("--keep", action="store_true", help="keep the rig's folders")
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    missing = power.fuse_missing() or (power.server_missing() if "postgres" in backends else None)
    if missing:
        print(f"cannot cut the power here: {missing}", file=sys.stderr)
        return 2
    tallies = []
    for backend in backends:
        folder = Path(tempfile.mkdtemp(prefix=f"tinystore-powercut-{backend}-"))
        rig = power.Rig(folder, backend, args.seed)
        try:
            rig.start()
            for mode in args.mode or power.MODES:
                began = time.monotonic()
                tallies.append(rig.run(mode, args.cuts))
                print(f"{tallies[-1].line()} ({time.monotonic() - began:.0f} s)", file=sys.stderr, flush=True)
        finally:
            rig.close()
            if args.keep:
                print(f"{backend}: the rig's files are in {folder}", file=sys.stderr)
            else:
                shutil.rmtree(folder, ignore_errors=True)
    print(table(tallies, args))
    failed = [t for t in tallies if (t.mode == "control") != bool(t.lost) or t.torn]
    return 1 if failed else 0


def table(tallies: list[power.Tally], args: argparse.Namespace) -> str:
    lines = [f"`--cuts {args.cuts} --seed {args.seed}`", "",
             "| backend | mode | cuts | acknowledged | lost | cuts that lost | unsynced pages dropped |",
             "|---|---|---|---|---|---|---|"]
    for t in tallies:
        torn = f" ({len(t.torn)} torn)" if t.torn else ""
        lines.append(f"| {t.backend} | {t.mode} | {t.cuts} | {t.acknowledged} | {len(t.lost)}{torn} | "
                     f"{t.cuts_that_lost} | {t.dropped_pages} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
