"""A Spark standalone cluster on this machine, on loopback: a master and workers started from
pyspark's own `spark-class` (no Spark download), each worker with its own work directory, so
that executors run in their own JVMs and directories as on separate hosts. For the tests, and for
trying `fleetwire report --master spark://...` before a real cluster.

    with Cluster(workdir, workers=2) as c:
        subprocess.run(["fleetwire", "report", "--master", c.url, ...])
"""

import json
import os
import socket
import subprocess
import time
import urllib.request

HOST = "127.0.0.1"


class ClusterError(Exception):
    """The cluster did not come up; the message names the log to read."""


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def spark_home():
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


class Cluster:
    """Start with start() (or `with`), stop with stop(). `url` is the master's spark:// URL."""

    def __init__(self, workdir, workers=2, cores=1, memory="1g", daemon_memory="256m"):
        self.workdir, self.n, self.cores, self.memory = str(workdir), workers, cores, memory
        self.env = dict(
            os.environ,
            SPARK_LOCAL_IP=HOST,
            SPARK_DAEMON_MEMORY=daemon_memory,
            SPARK_NO_DAEMONIZE="1",
            SPARK_LOG_DIR=os.path.join(self.workdir, "logs"),
        )
        self.env.pop("PYSPARK_SUBMIT_ARGS", None)
        self.procs = []
        self.url = None
        self.ui = None

    def _start(self, name, cls, *args):
        os.makedirs(os.path.join(self.workdir, "logs"), exist_ok=True)
        log = open(os.path.join(self.workdir, "logs", name + ".log"), "wb")
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), cls] + [str(a) for a in args]
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.workdir)
        log.close()
        self.procs.append(p)
        return p

    def start(self, timeout=120):
        port, self.ui = free_port(), free_port()
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            HOST,
            "--port",
            port,
            "--webui-port",
            self.ui,
        )
        self.url = "spark://%s:%d" % (HOST, port)
        for i in range(self.n):
            work = os.path.join(self.workdir, "worker-%d" % i)
            os.makedirs(work, exist_ok=True)
            self._start(
                "worker-%d" % i,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                HOST,
                "--port",
                free_port(),
                "--webui-port",
                free_port(),
                "--cores",
                self.cores,
                "--memory",
                self.memory,
                "--work-dir",
                work,
                self.url,
            )
        deadline = time.time() + timeout
        while time.time() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    self.stop()
                    raise ClusterError(
                        "a Spark daemon exited (%d); see %s/logs" % (p.returncode, self.workdir)
                    )
            if self.alive_workers() >= self.n:
                return self
            time.sleep(0.5)
        self.stop()
        raise ClusterError(
            "%d workers did not register with %s within %d s; see %s/logs"
            % (self.n, self.url, timeout, self.workdir)
        )

    def alive_workers(self):
        """Workers the master lists as ALIVE (its web UI's JSON), 0 while it is not up."""
        try:
            with urllib.request.urlopen("http://%s:%d/json/" % (HOST, self.ui), timeout=2) as r:
                state = json.load(r)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
