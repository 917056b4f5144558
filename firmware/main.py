# fleetwire main.py: the client with its store, the vitals agent and your app.py;
# see fleetwire/runner.py. Written to the board by `fleetwire deploy`.
# Once an over-the-air update was applied (fleetwire.ota) ota/boot.json exists, and
# fleetwire.otaboot picks the app that runs and moves a new release's trial on; a
# release on trial that raises is reset, and so rolled back.
import os
import sys

try:
    os.stat("ota/boot.json")
    _trial = True
except OSError:
    _trial = False
if _trial:
    from fleetwire import otaboot

    _trial = (otaboot.select() or {}).get("trial")
    del otaboot
    sys.modules.pop("fleetwire.otaboot", None)  # its work is done: its RAM goes back
from fleetwire import runner

if _trial:
    try:
        runner.main()
    except Exception as _e:
        from fleetwire import otaboot

        otaboot.failed(_e)
else:
    runner.main()
