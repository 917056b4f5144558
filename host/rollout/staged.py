"""Staged rollouts (`fleetwire rollout`): a release offered to a fleet a stage at a time, each
stage watched through the boards' vitals, and between stages the gate: the Spark report's
release table (firmware_cohort) for the devices already updated, against the release before.

A stage is a share of the fleet ("5%", cumulative: 5 %, then 25 %, then 100 %) or a named
group of devices ("canary", from the devices file; "*" is everyone). Devices are put in a
stable order by the SHA-256 of the release and their id, so a stage of a rollout is always
the same devices and each release gets its own canaries.

Per stage: offer (retained, fleetwire.host.rollout.service), then until every offered device is done
(confirmed, rolled back, refused or failed) or the stage's time is up: progress per stage
(offered, downloading, confirmed, rolled back, failed), a bar. Then:
- too many failures (rolled back + refused + failed over the devices offered so far, above
  max_failed_pct): halt;
- otherwise, unless it was the last stage: soak (the updated devices run a while), then the
  gate: the report's row for the release against the baseline's (the release the devices ran
  before). It halts when crash-free hours fall by more than max_crash_free_drop points, mean
  coverage by more than max_coverage_drop, or mean loss rises by more than max_loss_rise, or
  when the release has fewer than min_device_hours in the report (not enough to judge); with
  max_crash_free_devices_drop, when crash-free devices (the boards' crash records) fall by more.
  A halt names the release's top crash signature, a new one first.
A halt withdraws the offer from the devices that have not switched and, with
rollback_on_halt, orders those that did back to the baseline. The verdict says why, with the
numbers."""

import hashlib
import math
import sys
import time
from dataclasses import dataclass, field

# what a device's vitals say about the release -> the progress bucket it is in
OFFERED, DOWNLOADING, CONFIRMED, ROLLED_BACK, FAILED = (
    "offered",
    "downloading",
    "confirmed",
    "rolled back",
    "failed",
)
BUCKETS = (OFFERED, DOWNLOADING, CONFIRMED, ROLLED_BACK, FAILED)
DONE = (CONFIRMED, ROLLED_BACK, FAILED)


class RolloutError(ValueError):
    """A rollout that cannot start (bad stages, no devices, ...); the text says why."""


@dataclass
class Thresholds:
    max_crash_free_drop: float = 2.0  # percentage points of crash-free hours
    max_coverage_drop: float = 0.05  # mean coverage (0..1)
    max_loss_rise: float = 0.02  # mean loss rate (0..1)
    min_device_hours: float = 2.0  # of the new release in the report, to judge at all
    max_failed_pct: float = 20.0  # rolled back + refused + failed, of the devices offered
    # percentage points of crash-free devices (crash records, report table crash_releases); None: not
    # checked (boards on a fleetwire without crash capture send none)
    max_crash_free_devices_drop: float = None


@dataclass
class Stage:
    name: str
    devices: list  # every device up to this stage (cumulative)
    new: list  # the devices this stage adds


@dataclass
class Verdict:
    ok: bool
    lines: list = field(default_factory=list)  # one per check, with the numbers
    numbers: dict = field(default_factory=dict)
    reason: str = ""  # why it halts (one line), "" if ok


@dataclass
class Result:
    status: str  # "done" or "halted"
    stage: int  # the stage it ended in (1-based)
    reason: str = ""
    verdict: Verdict = None
    counts: dict = field(default_factory=dict)
    rolled_back: list = field(default_factory=list)  # devices ordered back


def order(devices, release):
    """The devices in the rollout's stable order (by SHA-256 of the release's and their id)."""
    key = release.sha256.encode()
    return sorted(devices, key=lambda d: hashlib.sha256(key + d.encode()).digest())


def plan(spec, devices, release, groups=None):
    """Stages from a spec: "5%,25%,100%" or group names "canary,eu,*" (groups: {id: group})."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if not items:
        raise RolloutError("no stages in %r" % spec)
    if not devices:
        raise RolloutError("no devices to roll out to")
    ordered = order(list(dict.fromkeys(devices)), release)
    stages, have = [], []
    for it in items:
        if it.endswith("%"):
            try:
                pct = float(it[:-1])
            except ValueError:
                raise RolloutError("stage %r: a share is a number of per cent, like 5%%" % it)
            if not 0 < pct <= 100:
                raise RolloutError("stage %r: a share is more than 0 %% and at most 100 %%" % it)
            n = max(1, math.ceil(len(ordered) * pct / 100))
            upto = ordered[:n]
        elif it == "*":
            upto = ordered
        else:
            members = [d for d in ordered if (groups or {}).get(d) == it]
            if not members:
                raise RolloutError(
                    "stage %r: no device is in group %r (the devices file's second column)" % (it, it)
                )
            upto = have + [d for d in members if d not in have]
        new = [d for d in upto if d not in have]
        if not new:
            raise RolloutError("stage %r adds no device to the stages before it" % it)
        have = have + new
        stages.append(Stage(it, list(have), new))
    return stages


def bucket(device, release):
    """Where a device (otaserve.Device, or None) stands with `release`."""
    if device is None:
        return OFFERED
    ota = device.ota or {}
    if ota.get("version") == release.version:
        s = ota.get("state")
        if s == "confirmed":
            return CONFIRMED
        if s == "rolled_back":
            return ROLLED_BACK
        if s in ("refused", "failed"):
            return FAILED
        if s in ("downloading", "verifying", "applied"):
            return DOWNLOADING
    if device.fw_version == release.version and not (ota.get("state") == "applied"):
        return CONFIRMED
    return OFFERED


def count(service, ids, release):
    c = dict.fromkeys(BUCKETS, 0)
    for d in ids:
        c[bucket(service.devices.get(d), release)] += 1
    return c


def bar(c, total, width=24):
    done = c[CONFIRMED] + c[ROLLED_BACK] + c[FAILED]
    k = int(width * done / total) if total else width
    return "[%s%s] %d/%d" % ("#" * k, "-" * (width - k), done, total)


def progress_line(i, n, stage, c, total):
    return "stage %d/%d %-6s %s  offered %d | downloading %d | confirmed %d | rolled back %d | failed %d" % (
        i,
        n,
        stage.name,
        bar(c, total),
        total,
        c[DOWNLOADING],
        c[CONFIRMED],
        c[ROLLED_BACK],
        c[FAILED],
    )


# ---- the gate


def _num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def judge(rows, version, baseline, th, crash=None):
    """The release table's rows (firmware_cohort, as dicts) -> Verdict for `version` against
    `baseline` (None: the row's prev_fw_version, the next lower release in the table). crash:
    the report's crash tables' rows {"crash_releases": [...], "crash_signatures": [...]}: a
    halt names the release's top crash signature (a new one first), and crash-free devices are
    checked when th.max_crash_free_devices_drop is set."""
    crash = crash or {}
    by = {r.get("fw_version"): r for r in rows}
    new = by.get(version)
    if new is None:
        why = "not enough to judge: %s is not in the report's release table (no records of it yet)" % version
        return Verdict(False, [why], {"device_hours": 0}, why)
    hours = _num(new.get("device_hours")) or 0
    if hours < th.min_device_hours:
        why = "not enough to judge: %s has %g device-hours in the report, the gate wants %g" % (
            version,
            hours,
            th.min_device_hours,
        )
        return Verdict(False, [why], {"device_hours": hours}, why)
    base_v = baseline if baseline in by else new.get("prev_fw_version")
    base = by.get(base_v)
    if base is None:
        why = "no release before %s in the report to compare with" % version
        return Verdict(False, [why], {}, why)
    checks = [
        ("crash-free hours", "crash_free_hours_pct", -1, th.max_crash_free_drop, "%.1f %%", "%+.1f points"),
        ("coverage", "mean_coverage", -1, th.max_coverage_drop, "%.3f", "%+.3f"),
        ("loss", "mean_loss_rate", +1, th.max_loss_rise, "%.4f", "%+.4f"),
    ]
    freed = {r.get("fw_version"): r for r in crash.get("crash_releases", ())}
    if th.max_crash_free_devices_drop is not None:
        checks.insert(
            1,
            (
                "crash-free devices",
                "crash_free_devices_pct",
                -1,
                th.max_crash_free_devices_drop,
                "%.1f %%",
                "%+.1f points",
            ),
        )
    lines, bad, numbers = [], [], {}
    for label, col, worse, limit, fmt, dfmt in checks:
        if col == "crash_free_devices_pct":
            a = _num(freed.get(version, {}).get(col, 100.0 if freed else None))
            b = _num(freed.get(base_v, {}).get(col, 100.0 if freed else None))
        else:
            a, b = _num(new.get(col)), _num(base.get(col))
        if a is None or b is None:
            lines.append("%-17s %s: no value" % (label, version if a is None else base_v))
            continue
        d = a - b
        fail = d * worse > limit
        numbers[col] = (a, b, d)
        line = "%-17s %s %s (%s device-hours) against %s %s (%s): %s, limit %s%s  %s" % (
            label,
            version,
            fmt % a,
            _hours(new),
            base_v,
            fmt % b,
            _hours(base),
            dfmt % d,
            "-" if worse < 0 else "+",
            (dfmt % limit).lstrip("+"),
            "HALT" if fail else "ok",
        )
        lines.append(line)
        if fail:
            bad.append(
                "%s %s on %s against %s on %s (%s, the limit is %s%s)"
                % (
                    label,
                    fmt % a,
                    version,
                    fmt % b,
                    base_v,
                    dfmt % d,
                    "-" if worse < 0 else "+",
                    (dfmt % limit).lstrip("+"),
                )
            )
    numbers["baseline"] = base_v
    why = "; ".join(bad)
    if bad:
        top = top_crash(crash.get("crash_signatures", ()), version, base_v)
        if top:
            numbers["top_crash"] = top
            lines.append("top crash         " + top)
            why += "; " + top
    return Verdict(not bad, lines, numbers, why)


def top_crash(signatures, version, baseline):
    """The top crash signature of `version` in the report's crash_signatures rows, a new one
    (not on `baseline`) first -> "top new crash <type> in <location>, N devices", or "". The
    location has the lines where the build kept them or a symbol map gave them."""
    from fleetwire.host.analytics.crashes import named, top

    row, new = top(list(signatures), version, baseline)
    if row is None:
        return ""
    n = int(row["devices"])
    return "top %scrash %s, %d device%s" % ("new " if new else "", named(row), n, "" if n == 1 else "s")


def _hours(row):
    h = _num(row.get("device_hours"))
    return "%g" % h if h is not None else "?"


def run_report(landing, out, log=print, crash=None, symbols=None):
    """The fleet report over `landing` into `out` (fleetwire.host.analytics, in this process)
    -> the release table's rows (firmware_cohort, as dicts); crash (a dict) gets the crash
    tables' rows (crash_releases, crash_signatures). RuntimeError when it fails."""
    from fleetwire.host.analytics import job

    try:
        res = job.report(landing, out, report=False, log=log, symbols=symbols)
    except Exception as e:  # noqa: BLE001 - the gate says what failed; the rollout halts on it
        raise RuntimeError("the fleet report over %s failed: %s" % (landing, e))
    if crash is not None:
        for t in ("crash_releases", "crash_signatures"):
            crash[t] = job.table_rows(res, t)
    return job.table_rows(res, "firmware_cohort")


class Gate:
    """The gate between stages: seal() makes the collector's files whole (the report reads whole
    files only), then the report over `landing`, then judge(). symbols: a directory of release
    symbol maps, so that a halt names the crash's function and lines."""

    def __init__(self, landing, out, th, seal=None, log=print, symbols=None):
        self.landing, self.out, self.th, self.seal, self.log = landing, out, th, seal, log
        self.symbols = symbols

    def __call__(self, version, baseline):
        if self.seal is not None:
            self.seal()
        crash = {}
        rows = run_report(self.landing, self.out, self.log, crash, self.symbols)
        return judge(rows, version, baseline, self.th, crash)


# ---- the rollout


class Rollout:
    """Rollout(service, release, stages, gate=None, th=Thresholds(), soak_s=60, stage_timeout_s=600,
    rollback_on_halt=False, baseline=None, out=sys.stdout, poll_s=1.0).run() -> Result."""

    def __init__(
        self,
        service,
        release,
        stages,
        gate=None,
        th=None,
        soak_s=60.0,
        stage_timeout_s=600.0,
        rollback_on_halt=False,
        baseline=None,
        out=None,
        poll_s=1.0,
        sleep=time.sleep,
    ):
        self.service, self.release, self.stages, self.gate = service, release, stages, gate
        self.th = th or Thresholds()
        self.soak_s, self.stage_timeout_s, self.poll_s = soak_s, stage_timeout_s, poll_s
        self.rollback_on_halt = rollback_on_halt
        self.baseline = baseline
        self.out = out or sys.stdout
        self.sleep = sleep
        self._tty = hasattr(self.out, "isatty") and self.out.isatty()
        self._last = None

    def say(self, msg):
        if self._last is not None and self._tty:
            self.out.write("\n")
        self._last = None
        self.out.write("[rollout] %s\n" % msg)
        self.out.flush()

    def _show(self, line, force=False):
        if line == self._last and not force:
            return
        if self._tty:
            self.out.write("\r" + line.ljust(110)[:140])
        else:
            self.out.write(line + "\n")
        self.out.flush()
        self._last = line

    def _baseline(self, ids):
        if self.baseline:
            return self.baseline
        seen = {}
        for d in ids:
            dev = self.service.devices.get(d)
            if dev is not None and dev.fw_version and dev.fw_version != self.release.version:
                seen[dev.fw_version] = seen.get(dev.fw_version, 0) + 1
        return max(seen, key=seen.get) if seen else None

    def run(self):
        rel, svc, n = self.release, self.service, len(self.stages)
        total = len(self.stages[-1].devices)
        self.say(
            "%s %s (%d bytes, sha256 %s...) to %d devices in %d stages: %s"
            % (
                rel.kind,
                rel.version,
                rel.size,
                rel.sha256[:12],
                total,
                n,
                ", ".join("%s (%d)" % (s.name, len(s.devices)) for s in self.stages),
            )
        )
        svc.add(rel)
        baseline = self._baseline(self.stages[-1].devices)
        counts = {}
        for i, stage in enumerate(self.stages, 1):
            svc.offer(stage.new, rel)
            self.say(
                "stage %d/%d (%s): offered to %d more devices, %d in all"
                % (i, n, stage.name, len(stage.new), len(stage.devices))
            )
            end = time.monotonic() + self.stage_timeout_s
            while True:
                counts = count(svc, stage.devices, rel)
                self._show(progress_line(i, n, stage, counts, len(stage.devices)))
                if counts[OFFERED] + counts[DOWNLOADING] == 0 or time.monotonic() > end:
                    break
                self.sleep(self.poll_s)
            waiting = counts[OFFERED] + counts[DOWNLOADING]
            if waiting:
                self.say(
                    "stage %d: %d devices had not finished after %g s; going on with the %d that did"
                    % (i, waiting, self.stage_timeout_s, len(stage.devices) - waiting)
                )
            bad = counts[ROLLED_BACK] + counts[FAILED]
            pct = 100.0 * bad / len(stage.devices)
            if pct > self.th.max_failed_pct:
                why = "%d of %d devices rolled back or failed (%.0f %%, the limit is %g %%)%s" % (
                    bad,
                    len(stage.devices),
                    pct,
                    self.th.max_failed_pct,
                    self._why(stage),
                )
                return self._halt(i, stage, counts, why, None, baseline)
            if i == n:
                break
            if self.gate is not None:
                self.say("stage %d: soaking %g s before the gate" % (i, self.soak_s))
                end = time.monotonic() + self.soak_s
                while time.monotonic() < end:
                    self.sleep(min(self.poll_s, max(0.0, end - time.monotonic())))
                    counts = count(svc, stage.devices, rel)
                    self._show(progress_line(i, n, stage, counts, len(stage.devices)))
                self.say(
                    "gate after stage %d: the report's release table, %s against %s"
                    % (i, rel.version, baseline or "the release before it")
                )
                v = self.gate(rel.version, baseline)
                for line in v.lines:
                    self.say("  " + line)
                if not v.ok:
                    return self._halt(i, stage, counts, v.reason, v, baseline)
                self.say("gate after stage %d: passed" % i)
        self.say(
            "done: %s on %d of %d devices (%d rolled back, %d failed)"
            % (rel.version, counts[CONFIRMED], total, counts[ROLLED_BACK], counts[FAILED])
        )
        return Result("done", n, counts=counts)

    def _why(self, stage):
        # the devices' own reasons, the commonest first
        why = {}
        for d in stage.devices:
            dev = self.service.devices.get(d)
            if dev is not None and bucket(dev, self.release) in (ROLLED_BACK, FAILED):
                k = (dev.ota.get("code"), dev.ota.get("reason"))
                why[k] = why.get(k, 0) + 1
        if not why:
            return ""
        (code, reason), k = max(why.items(), key=lambda kv: kv[1])
        return "; the commonest reason (%d devices): %s" % (k, reason or code)

    def _halt(self, i, stage, counts, reason, verdict, baseline):
        self.say("HALTED after stage %d (%s): %s" % (i, stage.name, reason))
        svc = self.service
        switched = [d for d in stage.devices if bucket(svc.devices.get(d), self.release) == CONFIRMED]
        pending = [d for d in stage.devices if d not in switched]
        svc.withdraw(pending)
        self.say("offer withdrawn from the %d devices that had not switched" % len(pending))
        back = []
        if self.rollback_on_halt and switched:
            if not baseline:
                self.say(
                    "no rollback ordered: the release before %s is not known (give --baseline)"
                    % self.release.version
                )
            else:
                svc.revert(switched, baseline, self.release.version)
                back = switched
                self.say("ordered %d devices back to %s" % (len(back), baseline))
        elif switched:
            self.say(
                "%d devices keep %s (--rollback-on-halt orders them back)"
                % (len(switched), self.release.version)
            )
        return Result("halted", i, reason, verdict, counts, back)
