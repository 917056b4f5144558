# The board's main program, run by main.py (firmware/main.py): the client with its
# store on the `mqtt` partition (or a file store), the vitals agent, and the
# application in app.py (optional):
#   def setup(client): ...   called once connected
#   def step(client): ...    called every loop
# With "ota": true in config.json, over-the-air updates (fleetwire.ota): the board takes
# releases offered on fleet/<id>/ota/offer, and a new one on trial must connect and get
# its first vitals record acknowledged within ota_confirm_s (default 120) or it is reset
# and rolled back.
# With "cert_renew_days" in config.json (and mutual TLS), the board's certificate is renewed
# over the air that many days before it expires, or when the operator orders it
# (fleetwire.tls.watch).
# With "commands": true, commands (fleetwire.cmd: "reboot" built in; app.py's
# commands(cmds), if it has one, adds its own with cmds.on(name, fn)); with "desired": true, desired state
# (fleetwire.desired), whose "config" section sets period_s (the vitals period) and loop_ms
# without a redeploy.
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
        if not board.wlan_connect(
            cfg["wifi_ssid"], cfg.get("wifi_password", ""), cfg.get("wifi_timeout_ms", 20000)
        ):
            print("boot: Wi-Fi %r not reachable yet; main.py keeps trying" % cfg["wifi_ssid"])


def open_store(cfg):
    try:
        import esp32

        parts = esp32.Partition.find(esp32.Partition.TYPE_DATA, label=cfg.get("partition", "mqtt"))
        if parts:
            from .ring.store import RingStore

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
    if cfg.get("tls_cert") and cfg.get("cert_renew_days") is not None:
        from .tls.watch import settle

        settle(cfg["tls_cert"])  # a certificate switch a power cut interrupted
    from .identity import Context

    return Context(cfg)


def _why(e):
    # A failed connect, named by its class (fleetwire.tls.errors' for a TLS refusal)
    return "%s: %s" % (type(e).__name__, e)


def _since(t0):
    if hasattr(time, "ticks_ms"):
        return time.ticks_diff(time.ticks_ms(), t0)
    return int(time.time() * 1000) - t0


def _sleep(ms):
    time.sleep_ms(ms) if hasattr(time, "sleep_ms") else time.sleep(ms / 1000)


def _ota_state(cfg):
    # the release this board runs and its trial (fleetwire.otaboot), when updates are on or
    # one was ever applied; None otherwise (and nothing of the updater is loaded)
    import os

    try:
        os.stat("ota/boot.json")
    except OSError:
        if not cfg.get("ota"):
            return None
    from .ota.state import load as ota_load

    return ota_load() or {}


def _remote(vitals, loop):
    # the desired state's "config" section: what it may set, checked before any of it is used
    def apply(c):
        c = c or {}
        for k in ("period_s", "loop_ms"):
            v = c.get(k)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError("%s must be a whole number of at least 1, not %r" % (k, v))
        if c.get("period_s"):
            vitals.every(c["period_s"])
        if c.get("loop_ms"):
            loop[0] = c["loop_ms"]

    return apply


def main(path="config.json"):
    from .client import MQTTClient
    from .vitals import Vitals

    t0 = time.ticks_ms() if hasattr(time, "ticks_ms") else int(time.time() * 1000)
    cfg = load(path)
    ota = _ota_state(cfg)
    trial = ota.get("trial") if ota else None
    gc.collect()
    ctx = tls(cfg)
    client = MQTTClient(
        cfg["device_id"],
        cfg["broker"],
        cfg.get("port", 0),
        cfg.get("mqtt_user"),
        cfg.get("mqtt_password"),
        keepalive=cfg.get("keepalive", 60),
        ssl=ctx,
        reconnect=True,
        queue_size=cfg.get("queue_size", 16),
        store=open_store(cfg),
        max_packet=cfg.get("max_packet", 1024),
    )
    version = (ota or {}).get("version") or cfg.get("fw_version", "dev")
    vitals = Vitals(client, cfg["device_id"], version, cfg.get("period_s", 60), state="vitals.json")
    print("main: boot", vitals.boot(), "as", cfg["device_id"])
    cap = _capture(cfg, vitals, version)
    try:
        _serve(cfg, client, vitals, ota, trial, t0, ctx, cap)
    except Exception as e:
        if cap is None:
            raise
        try:
            cap.catch(e)  # allocates nothing: a MemoryError is recorded as well
        except Exception:  # whatever happens, the board resets
            pass
        print("main: crashed (%s); resetting" % _why(e))
        if trial:
            raise  # main.py's otaboot.failed(): the rollback names it
        board.reset()
        raise


def _capture(cfg, vitals, version):
    # fleetwire.crash, unless "crash": false: the last boot's record (or the reset that
    # ended it) goes to flash now, and is sent once connected (fleetwire.crashsend)
    if not cfg.get("crash", True):
        return None
    from . import crash
    from .store import once

    try:
        once(
            "crashsend",
            "install",
            crash._w,
            version,
            vitals._st["boot_id"],
            cfg.get("crash_lines", 8),
            cfg.get("crash_width", 64),
            cfg.get("crash_size", 1024),
        )
    except ValueError as e:  # sizes the record cannot have: the board runs on, unrecorded
        print("main: no crash records:", e)
        return None
    if once("crashsend", "keep", vitals._cause, vitals._st["boot_id"]) == "exception":
        vitals._cause = "panic"  # the runner's reset after a crash reads as a deliberate one
    if cfg.get("crash_print"):
        from . import crashprint  # noqa: F401 (print() feeds the log ring from now on)
    return crash


def _sender(client, cfg):
    # the crash records waiting on flash, sent one at a time (None: none wait)
    import os

    try:
        if not os.listdir("crash"):
            return None
    except OSError:
        return None
    from .crashsend import Sender

    return Sender(client, cfg["device_id"])


def _serve(cfg, client, vitals, ota, trial, t0, ctx, cap):
    from .client import MQTTException

    try:
        import app
    except ImportError:
        app = None
    loop = [cfg.get("loop_ms", 200)]
    reboot = []
    st = cmds = None
    other = [None]  # the app's own callback, set in its setup()

    def route(t, m):
        if (st is None or not st.handle(t, m, client.rest)) and other[0] is not None:
            other[0](t, m)

    if cfg.get("desired"):
        # before connect(): the documents that waited at the broker come right after CONNACK
        from .desired import State

        st = State(cfg["device_id"], lambda t, p: client.publish(t, p, True, 1, block=False))
        st.due = True
        apply = _remote(vitals, loop)
        try:
            apply(st.get("config"))
        except ValueError as e:
            print("main: desired config not used:", e)
        st.on("config", apply)
        client.set_callback(route)
    if cfg.get("commands"):
        from .cmd import enable as commands

        cmds = commands(client, cfg["device_id"], callback=route)
        cmds.on("reboot", lambda a: reboot.append(1) or "rebooting")
        if app is not None and hasattr(app, "commands"):
            app.commands(cmds)  # the app's own: cmds.on(name, fn)
    ours = client.cb
    wifi = (cfg.get("wifi_ssid"), cfg.get("wifi_password", ""), cfg.get("wifi_timeout_ms", 20000))
    while True:
        try:
            if not wifi[0] or board.wlan_connect(*wifi):
                client.connect(clean_session=False)
                break
        except (OSError, MQTTException) as e:  # a refusal too: the records wait, a deploy mends it
            print("main: not connected:", _why(e))
        if trial and _since(t0) > cfg.get("ota_confirm_s", 120) * 1000:
            from .otaboot import expire

            expire(
                "release %s: not connected within %d s of boot"
                % (trial.get("version"), cfg.get("ota_confirm_s", 120))
            )
        # records go on meanwhile: they wait in the store for the first connection
        for _ in range(25):
            vitals.step()
            _sleep(200)
    print("main: connected to", cfg["broker"])
    if ctx is not None:
        said = [None]

        def retry(attempt, delay_ms):
            # the client retries by itself; a refused certificate is worth a line, once per reason
            why = client.ssl.last  # (a renewal may have given the client another context)
            if why is None or type(why) is not said[0]:
                said[0] = type(why) if why is not None else None
                if why is not None:
                    print("main: reconnecting:", _why(why))

        client.on_reconnect = retry
    for t in (cmds and cmds.t_run, st and st.t_des):
        if t:
            client.subscribe(t, 1)
    if app is not None and hasattr(app, "setup"):
        app.setup(client)
        if ours is not None and client.cb is not ours:  # the app's callback gets the rest
            other[0] = client.cb
            client.set_callback(ours)
    upd = None
    if ota is not None:
        from .ota.agent import enable

        # the app's own callback (set in setup) still gets every other message
        upd = enable(
            client, cfg["device_id"], vitals, callback=getattr(client, "cb", None), cfg=cfg, boot_ms=t0
        )
        gc.collect()
    snd = _sender(client, cfg) if cap is not None else None
    ren = None
    if ctx is not None and cfg.get("tls_cert") and cfg.get("cert_renew_days") is not None:
        from .tls.watch import Watch

        ren = Watch(client, cfg, getattr(client, "cb", None))  # certificates renewed over the air
        gc.collect()
    online = True
    while True:
        vitals.step()
        if upd is not None:
            upd.step()
        if snd is not None:
            snd.step()
            if not snd.left:
                snd = snd.close()
        if ren is not None:
            ren.step()
        if cmds is not None:
            cmds.step()
            if reboot and not client.pending:  # its answer is acknowledged: reset
                vitals.deliberate_reset()
        if st is not None:
            st.step()
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
        client.loop(loop[0])
