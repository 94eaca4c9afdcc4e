"""Decisions: what happens next, decided from facts the layers above gather and act on.

Pure: no database, no process, no git; see docs/CONVENTIONS.md.
"""
