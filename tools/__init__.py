# fleetwire.tools: the `fleetwire` command line.
