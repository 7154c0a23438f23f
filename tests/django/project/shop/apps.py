import os
import sys
import time

from django.apps import AppConfig
from django.core import checks


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self) -> None:
        if os.environ.get("SHOP_SLOW_CHECKS"):
            checks.register(slow_check)


def slow_check(**kwargs):
    """With SHOP_SLOW_CHECKS: say so on stderr, then take up to a minute, as a large project's checks may
    (a signal during it is the test's)."""
    sys.stderr.write("checking\n")
    sys.stderr.flush()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return []
