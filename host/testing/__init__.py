"""Test kit: the pytest plugins (real brokers, observers, HIL fixtures), the fault-injecting
proxy, a scripted broker and an independent observer."""
