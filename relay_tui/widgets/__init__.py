"""The main screen's live tables, one per file, on the LiveTable base; the event log."""
