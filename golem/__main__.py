"""`python3 -m golem` is the same program as the `golem` command."""

import sys

from golem.cli import main

if __name__ == "__main__":
    sys.exit(main())
