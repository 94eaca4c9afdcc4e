"""``relay-tui --demo``'s throw-away workspace, and the fixed sample state the snapshot tests
and screenshots draw."""
