"""What crosses relay's edges: relay.toml, job files, the answers agents give, prompts, prices.

Pure: parsing and validation; the few functions that read a file they are given say so.
"""
