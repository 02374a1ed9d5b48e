"""``python -m pycanal.cli``: the ``pycanal`` command."""

from pycanal.cli import main

main()
