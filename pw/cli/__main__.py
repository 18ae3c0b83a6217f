"""`python -m pw.cli`: the same as the `pw` entry point."""

import sys

from pw.cli import main

sys.exit(main())
