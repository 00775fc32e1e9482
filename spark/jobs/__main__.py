"""``python -m spark.jobs NAME|all …`` (see :mod:`spark.jobs.cli`)."""

from spark.jobs.cli import main

raise SystemExit(main())
