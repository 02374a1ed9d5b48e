"""``python -m pycanal.cli`` (or this file as a script, as spark-submit runs one): the ``pycanal``
command."""

from pycanal.cli import main

if __name__ == "__main__":
    main()
