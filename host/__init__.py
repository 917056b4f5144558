# fleetwire.host: CPython-only code (build tools, rig, proxy, analytics).
