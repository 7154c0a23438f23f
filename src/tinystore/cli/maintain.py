"""Remove now the done and failed jobs past ``dedupe`` and ``keep``: rows, payloads and steps leave the file.

Workers do this every minute; the command is for a store no worker serves,
or to reclaim space at once. Progress shows on a terminal only.
"""

from __future__ import annotations

import argparse

from ._common import Progress, add_json_argument, add_store_argument, open_store, print_json

NAME = "maintain"
HELP = "remove the jobs past keep and dedupe now"


def configure(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    progress = Progress()
    with open_store(args) as store:
        try:
            result = store.maintain(progress=lambda removed: progress.update(f"maintain: removed {removed} jobs"))
        finally:
            progress.done()
    if args.json:
        print_json(result)
    else:
        print(f"removed {result['removed']} done and failed jobs past dedupe and keep")
    return 0
