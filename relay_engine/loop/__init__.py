"""The engine's loop: the tick and its steps in DESIGN order, and what runs beside it."""
