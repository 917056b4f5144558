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
    if not cfg.get("tls_ca"):
        return None
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    with open(cfg["tls_ca"], "rb") as f:
        ctx.load_verify_locations(cadata=f.read())
    return ctx


def _sleep(ms):
    time.sleep_ms(ms) if hasattr(time, "sleep_ms") else time.sleep(ms / 1000)


def main(path="config.json"):
    from .client import MQTTClient
    from .vitals import Vitals
    cfg = load(path)
    gc.collect()
    client = MQTTClient(cfg["device_id"], cfg["broker"], cfg.get("port", 0), cfg.get("mqtt_user"),
                        cfg.get("mqtt_password"), keepalive=cfg.get("keepalive", 60), ssl=tls(cfg),
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
        except OSError as e:
            print("main: broker not reachable:", e)
        _sleep(5000)
    print("main: connected to", cfg["broker"])
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
