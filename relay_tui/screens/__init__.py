"""Screens and modals of the relay console."""
