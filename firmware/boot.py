# fleetwire boot.py: bring up Wi-Fi from config.json (main.py runs next).
# Written to the board by `fleetwire deploy`.
from fleetwire import runner

runner.boot()
