"""``python -m rnndoctor``: the same as the ``rnndoctor`` command."""

from rnndoctor.cli import main

main()
