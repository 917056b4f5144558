"""pytest fixtures for tests that need real components (brokers, observers, boards)."""
