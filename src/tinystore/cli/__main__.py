"""``python -m tinystore.cli``: the same as the ``tinystore`` command."""

import sys

from . import main

sys.exit(main())
