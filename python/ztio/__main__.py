"""``python -m ztio ...`` and the ``zt`` command of the wheel: the ``zt`` tool itself (the
same code as the ``zt`` binary, built into the extension module)."""

import sys

from . import _native


def main() -> None:
    """Runs ``zt`` with this process's arguments and exits with its status."""
    sys.stdout.flush()
    sys.exit(_native.run_cli(["zt", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
