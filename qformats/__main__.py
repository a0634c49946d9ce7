"""``python -m qformats`` is the ``qformats`` command."""

import sys

from .cli import main

sys.exit(main())
