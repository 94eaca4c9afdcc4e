"""``python -m relay_engine.cli``: the ``relay`` command."""

from relay_engine.cli.main import main

raise SystemExit(main())
