#!/usr/bin/env python
"""The test project's manage.py: SHOP_DATABASE names its database (a SQLite file, or a PostgreSQL URL)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
