# The board's main program, run by main.py (firmware/main.py): the client with its
# store on the `mqtt` partition (or a file store), the vitals agent, and the
# application in app.py (optional):
#   def setup(client): ...   called once connected
#   def step(client): ...    called every loop
# A module, not main.py itself: loaded as .mpy it needs no compiler heap on the board.
import gc
import json
import time

from . import board


def load(path="config.json"):
    with open(path) as f:
        return json.load(f)


def boot(path="config.json"):
    """boot.py's part: bring up Wi-Fi from config.json."""
    try:
        cfg = load(path)
    except (OSError, ValueError):
        return
    if cfg.get("wifi_ssid"):
        if not board.wlan_connect(cfg["wifi_ssid"], cfg.get("wifi_password", ""), cfg.get("wifi_timeout_ms", 20000)):
            print("boot: Wi-Fi %r not reachable yet; main.py keeps trying" % cfg["wifi_ssid"])


def open_store(cfg):
    try:
        import esp32
        parts = esp32.Partition.find(esp32.Partition.TYPE_DATA, label=cfg.get("partition", "mqtt"))
        if parts:
            from .ringstore import RingStore
            return RingStore(parts[0])
    except ImportError:
        pass
    except ValueError as e:  # a partition the ring cannot use: say why, keep the messages in files
        print("main:", e, "- using the file store")
    import os
    try:
        os.mkdir("store")
    except OSError:
        pass
    return "store"  # no partition: one file per message (fleetwire.filestore)


def tls(cfg):
    """The TLS context from config.json: tls_ca (the broker is checked), and with tls_cert and
    tls_key the board's own certificate (mutual TLS); None without TLS."""
    if not cfg.get("tls_ca") and not cfg.get("tls_cert"):
        return None
    from .identity import Context
    return Context(cfg)


def _why(e):
    # A failed connect, named by its class (fleetwire.tlserrors' for a TLS refusal)
    return "%s: %s" % (type(e).__name__, e)


def _sleep(ms):
    time.sleep_ms(ms) if hasattr(time, "sleep_ms") else time.sleep(ms / 1000)


def main(path="config.json"):
    from .client import MQTTClient, MQTTException
    from .vitals import Vitals
    cfg = load(path)
    gc.collect()
    ctx = tls(cfg)
    client = MQTTClient(cfg["device_id"], cfg["broker"], cfg.get("port", 0), cfg.get("mqtt_user"),
                        cfg.get("mqtt_password"), keepalive=cfg.get("keepalive", 60), ssl=ctx,
                        reconnect=True, queue_size=cfg.get("queue_size", 16), store=open_store(cfg))
    vitals = Vitals(client, cfg["device_id"], cfg.get("fw_version", "dev"), cfg.get("period_s", 60),
                    state="vitals.json")
    print("main: boot", vitals.boot(), "as", cfg["device_id"])
    try:
        import app
    except ImportError:
        app = None
    wifi = (cfg.get("wifi_ssid"), cfg.get("wifi_password", ""))
    while True:
        try:
            if not wifi[0] or board.wlan_connect(*wifi):
                client.connect(clean_session=False)
                break
        except (OSError, MQTTException) as e:  # a refusal too: the records wait, a deploy mends it
            print("main: not connected:", _why(e))
        # records go on meanwhile: they wait in the store for the first connection
        for _ in range(25):
            vitals.step()
            _sleep(200)
    print("main: connected to", cfg["broker"])
    if ctx is not None:
        said = [None]

        def retry(attempt, delay_ms):
            # the client retries by itself; a refused certificate is worth a line, once per reason
            why = ctx.last
            if why is None or type(why) is not said[0]:
                said[0] = type(why) if why is not None else None
                if why is not None:
                    print("main: reconnecting:", _why(why))
        client.on_reconnect = retry
    if app is not None and hasattr(app, "setup"):
        app.setup(client)
    online = True
    while True:
        vitals.step()
        if app is not None and hasattr(app, "step"):
            app.step(client)
        if wifi[0] and not board.wlan_up():
            if online:
                print("main: Wi-Fi lost; records wait in the store")
            online = False
            _sleep(200)
            continue
        if not online:
            print("main: Wi-Fi back")
            online = True
        client.loop(cfg.get("loop_ms", 200))
