"""House rules: the linters, the import contracts, the type checker and the length of
functions, each a test that fails the build with the tool's own words.

The tools run as subprocesses from the repository root with the configuration in
pyproject.toml (which is why this is a tier of its own: tests/unit refuses processes).
docs/CONVENTIONS.md ("House rules") says how to run each one by hand.
"""
