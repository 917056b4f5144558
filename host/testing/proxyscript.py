"""The fault script of `fleetwire proxy --script FILE`: one step a line (cut, corrupt,
blackhole, refuse, delay, throttle, wait, clear, repeat), parsed with the line named in any
error, and run against a fleetwire.host.testing.proxy.Proxy."""

import threading

from fleetwire.host.testing.proxy import DIRS, packet_type, check_dir


SCRIPT_HELP = """\
One step per line; '#' starts a comment. Steps run in order:
  wait SECONDS                         pause the script
  cut [up|down] [at N | after TYPE [N]] [graceful]
                                       cut now, N bytes further, or after the Nth TYPE packet
  corrupt up|down at N [xor X]         flip bits of one byte
  blackhole on|off [new]               pass nothing (new: new connections too)
  refuse SECONDS                       reset new connections for a while
  delay MS [up|down]                   hold each chunk
  throttle BYTES_PER_S [up|down]       limit the rate (0: off)
  clear                                drop all faults
  repeat                               start the script again from the top
"""


def parse_script(text):
    """-> [(line number, verb, args)]; raises ValueError naming the bad line."""
    steps = []
    for no, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        verb, args = words[0].lower(), words[1:]
        try:
            steps.append((no, verb, _parse_step(verb, args)))
        except (ValueError, IndexError) as e:
            raise ValueError("script line %d (%r): %s" % (no, line.strip(), e))
    return steps


def _num(s):
    return float(s) if "." in s else int(s, 0)


def _parse_step(verb, a):
    if verb == "wait":
        return {"seconds": float(a[0])}
    if verb == "cut":
        kw = {"graceful": "graceful" in a}
        a = [w for w in a if w != "graceful"]
        if a and a[0] in DIRS:
            kw["direction"] = a.pop(0)
        if a and a[0] == "at":
            kw["at"] = int(a[1])
        elif a and a[0] == "after":
            packet_type(a[1])
            kw["after"] = a[1]
            if len(a) > 2:
                kw["nth"] = int(a[2])
        elif a:
            raise ValueError("expected 'at N' or 'after TYPE [N]'")
        return kw
    if verb == "corrupt":
        check_dir(a[0])
        if a[1] != "at":
            raise ValueError("expected 'corrupt up|down at N'")
        kw = {"direction": a[0], "at": int(a[2])}
        if len(a) > 4 and a[3] == "xor":
            kw["xor"] = int(a[4], 0)
        return kw
    if verb == "blackhole":
        if a[0] not in ("on", "off"):
            raise ValueError("blackhole on|off")
        return {"on": a[0] == "on", "new": "new" in a[1:]}
    if verb == "refuse":
        return {"seconds": float(a[0])}
    if verb in ("delay", "throttle"):
        kw = {"value": _num(a[0])}
        if len(a) > 1:
            check_dir(a[1])
            kw["direction"] = a[1]
        return kw
    if verb in ("clear", "repeat"):
        return {}
    raise ValueError("unknown step %r" % verb)


def run_script(proxy, steps, stop=None):
    """Carry out parsed steps on proxy (until `stop`, a threading.Event, is set)."""
    stop = stop or threading.Event()
    while not stop.is_set():
        for _no, verb, kw in steps:
            if stop.is_set():
                return
            if verb == "wait":
                stop.wait(kw["seconds"])
            elif verb == "cut":
                proxy.cut(**kw)
            elif verb == "corrupt":
                proxy.corrupt(**kw)
            elif verb == "blackhole":
                proxy.blackhole(**kw)
            elif verb == "refuse":
                proxy.refuse(**kw)
            elif verb == "delay":
                proxy.delay(kw["value"], kw.get("direction"))
            elif verb == "throttle":
                proxy.throttle(kw["value"], kw.get("direction"))
            elif verb == "clear":
                proxy.clear()
        if not any(v == "repeat" for _n, v, _k in steps):
            return
