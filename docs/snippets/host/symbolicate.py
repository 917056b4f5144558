# A crash's traceback from a board running .mpy (-O3: every frame says line 1), resolved
# with the symbol map its release was built with
import json
import sys

from fleetwire.host.rig import symbols

crash = json.load(open(sys.argv[1]))  # a record the collector landed
release = symbols.load(sys.argv[2])  # app-1.5.0.symbols.json, kept beside the bundle
print(symbols.symbolicate(crash["traceback"], release), end="")
