"""Command line: `python -m metal_linalg_torch [info | bench | calibrate | demo]` (no subcommand:
the demo). The same commands, flags and files as `python -m metal_linalg` (`_shared.cli`)."""

from __future__ import annotations

import sys

from ._shared import cli


def _frontend():
    from ._frontend import frontend

    return frontend()


def main(argv=None) -> int:
    return cli.main("metal_linalg_torch", _frontend, argv)


if __name__ == "__main__":
    sys.exit(main())
