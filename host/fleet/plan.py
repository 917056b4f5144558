"""How a simulated fleet fits this machine (`fleetwire demo`): how many worker processes, and how
far time may be compressed before the simulator, the broker and the collector fall behind.

The figures are bench/README.md's ("Fleet at scale", bench/fleet_scale.py): what the whole
pipeline (simulator with mutual TLS, mosquitto, collector) keeps up with per core of this
2-core machine. They are a starting point, not a promise: the simulator measures its own lag
(fleetwire.host.fleet.lag) and says so when it falls behind anyway."""

import math
import os

RECORDS_PER_CORE = 400  # records/s the pipeline keeps up with, per core
DEVICES_PER_WORKER = 1500  # a worker process's share (one saturates a core at about 3,000)


class Choice:
    def __init__(self, devices, period_s, asked_speed, speed, workers, cores):
        self.devices, self.period_s = devices, period_s
        self.asked_speed, self.speed = asked_speed, speed
        self.workers, self.cores = workers, cores

    @property
    def budget(self):
        return RECORDS_PER_CORE * self.cores

    def rate(self, speed=None):
        return self.devices * (speed or self.speed) / self.period_s

    def words(self, hours):
        """What was chosen and why, for a person."""
        out = [
            "%d devices in %d simulator process%s, up to %d each (a process per %d devices, at most one a "
            "core: %d cores)"
            % (
                self.devices,
                self.workers,
                "" if self.workers == 1 else "es",
                math.ceil(self.devices / self.workers),
                DEVICES_PER_WORKER,
                self.cores,
            )
        ]
        took = "%g simulated hours take %s" % (hours, _minutes(hours * 3600 / self.speed))
        if self.speed < self.asked_speed:
            out.append(
                "time compressed %.3gx, not the %.3gx asked: at that %d devices reporting every %d s "
                "make %.0f records/s, this machine keeps up with %d (%d a core); %s"
                % (
                    self.speed,
                    self.asked_speed,
                    self.devices,
                    self.period_s,
                    self.rate(self.asked_speed),
                    self.budget,
                    RECORDS_PER_CORE,
                    took,
                )
            )
        else:
            out.append(
                "time compressed %.3gx: %.0f records/s, within the %d this machine keeps up with; %s"
                % (self.speed, self.rate(), self.budget, took)
            )
        return out


def _minutes(seconds):
    return "%.0f s" % seconds if seconds < 120 else "%.0f min" % (seconds / 60)


def pick_workers(devices, cores):
    return max(1, min(cores, math.ceil(devices / DEVICES_PER_WORKER)))


def choose(devices, period_s, speed, workers=None, cores=None):
    """-> Choice: `workers` (or one per DEVICES_PER_WORKER devices, at most one per core) and
    `speed`, lowered to what the machine keeps up with."""
    cores = cores or os.cpu_count() or 1
    workers = workers or pick_workers(devices, cores)
    fits = RECORDS_PER_CORE * cores * period_s / devices
    return Choice(devices, period_s, speed, min(speed, fits), workers, cores)
