"""relay-tui, the operator console. Where a change goes:

- ``app.py`` wires the reader, the embedded engine (``engine_thread.py``) and the screens;
  ``cli.py`` is the ``relay-tui`` command, ``crash.py`` what a crash leaves, ``messages.py``
  what threads, screens and widgets tell each other, ``app.tcss`` every style.
- ``actions/``: what keys do (mixins of the app), the row a key acts on, the palette.
- ``screens/``: one screen or dialog per file.
- ``widgets/``: one live table per file, the event log, and the LiveTable base.
- ``render/``: pure text and graph building (views in, Rich Text out).
- ``data/``: the reader thread, its snapshots, the detail reads, output following.
- ``demo/``: the ``--demo`` workspace and the fixed sample the snapshot tests draw.

Each layer imports only the layers below it (the import-linter contracts in pyproject.toml).
"""
