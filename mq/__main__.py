"""``python -m mq`` runs the ``mq`` command."""

import sys

from mq.cli import main

sys.exit(main())
