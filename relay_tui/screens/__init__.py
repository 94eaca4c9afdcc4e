"""Screens and dialogs of the relay console, one per file; what they share is in base.py."""
