"""Pause queues: every process stops starting their jobs; running ones go on and settle."""

from __future__ import annotations

import argparse

from ._common import add_json_argument, add_store_argument, open_queue, open_store, print_json

NAME = "pause"
HELP = "stop every process from starting the jobs of queues (all of them when none is named)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_queues_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return change(args, paused=True)


def add_queues_arguments(parser: argparse.ArgumentParser) -> None:
    """STORE [QUEUE ...] [--schema NAME] [--json]: the arguments of pause and resume."""
    add_store_argument(parser)
    parser.add_argument("queues", metavar="QUEUE", nargs="*", help="a queue the store keeps (default: every queue)")
    add_json_argument(parser)


def change(args: argparse.Namespace, paused: bool) -> int:
    """Pause (or resume) the queues named, every one the store keeps where none is: each named one is
    looked for first, so that a name the store does not keep changes nothing. Says which it changed, and
    which were so already (``--json``: ``unchanged``)."""
    with open_store(args) as store:
        names = list(dict.fromkeys(args.queues)) or store.queues()
        queues = [open_queue(store, name) for name in names]
        changed = {queue.name: queue.pause() if paused else queue.resume() for queue in queues}
    word = "paused" if paused else "resumed"
    if args.json:
        print_json({word: [n for n in names if changed[n]], "unchanged": [n for n in names if not changed[n]]})
    elif not names:
        print("no queues yet")
    else:
        already = "was paused already" if paused else "was not paused"
        for name in names:
            print(f"queue {name} {word}" if changed[name] else f"queue {name} {already}: nothing changed")
    return 0
