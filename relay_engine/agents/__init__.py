"""Agent processes: CLI adapters, launching, the supervisor, the sim agent, ``relay doctor``."""
