"""Command line: `python -m colabkit sweep ...` (see `python -m colabkit --help`)."""

from colabkit.cli import main

raise SystemExit(main())
