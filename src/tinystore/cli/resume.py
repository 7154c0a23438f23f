"""Resume paused queues: their due jobs start again, in start order, in every process."""

from __future__ import annotations

import argparse

from .pause import add_queues_arguments, change

NAME = "resume"
HELP = "let every process start the jobs of paused queues again (all of them when none is named)"


def configure(parser: argparse.ArgumentParser) -> None:
    add_queues_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return change(args, paused=False)
