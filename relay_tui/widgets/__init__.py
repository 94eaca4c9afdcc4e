"""Widgets of the relay console."""
