# fleetwire main.py: the client with its store, the vitals agent and your app.py;
# see fleetwire/runner.py. Written to the board by `fleetwire deploy`.
from fleetwire import runner

runner.main()
