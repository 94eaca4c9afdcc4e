"""The ``relay`` command: one module per group of subcommands, over the layers below."""
