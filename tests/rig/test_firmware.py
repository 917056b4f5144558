"""firmware/: the build tree installs with mip from wherever it is served, the freeze
manifest points at the build, and the partition table has the store's partition."""

import functools
import http.server
import json
import os
import subprocess
import sys
import threading

from fleetwire.host.rig import build
from fleetwire.host.rig.vboard import VirtualBoard, wait_for_prompt
from support import ROOT

FIRMWARE = os.path.join(ROOT, "firmware")


def test_mip_installs_the_build_onto_a_board_over_http(tmp_path):
    out = tmp_path / "served"
    written = build.build(str(out), mpy=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    b = VirtualBoard(str(tmp_path / "vb")).start()
    try:
        assert wait_for_prompt(b.port)
        url = "http://127.0.0.1:%d/package.json" % httpd.server_address[1]
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mpremote",
                "connect",
                b.port,
                "resume",
                "mip",
                "install",
                "--target",
                "lib",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        installed = {os.path.relpath(os.path.join(d, f), b.fs) for d, _, fs in os.walk(b.fs) for f in fs}
        assert installed >= set(written)
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mpremote",
                "connect",
                b.port,
                "resume",
                "exec",
                "from fleetwire import MQTTClient; print(MQTTClient.__name__)",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.stdout.strip() == "MQTTClient", r.stderr
    finally:
        b.stop()
        httpd.shutdown()


def test_the_repository_package_json_is_the_board_tree_and_up_to_date(tmp_path):
    with open(os.path.join(ROOT, "package.json")) as f:
        text = f.read()
    fresh = build.dump_package_json(build.repo_package_json(ROOT))
    assert text == fresh, "package.json is stale: python -m fleetwire.host.rig.build --package-json ."
    urls = json.loads(text)["urls"]
    written = build.build(str(tmp_path / "tree"))
    assert sorted(dst for dst, _ in urls) == sorted(w[len("lib/") :] for w in written)
    for _dst, src in urls:
        assert os.path.isfile(os.path.join(ROOT, src)), src


def test_mip_installs_from_the_repository_itself_with_no_build(tmp_path):
    # What `mip.install("github:OWNER/fleetwire")` does, from a clone: the sources,
    # compiled on the board at import. That needs a bigger heap than .mpy does.
    b = VirtualBoard(str(tmp_path / "vb"), heap="192K").start()
    try:
        assert wait_for_prompt(b.port)
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mpremote",
                "connect",
                b.port,
                "resume",
                "mip",
                "install",
                "--target",
                "lib",
                os.path.join(ROOT, "package.json"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        with open(os.path.join(ROOT, "package.json")) as f:
            for dst, src in json.load(f)["urls"]:
                with (
                    open(os.path.join(b.fs, "lib", dst), "rb") as got,
                    open(os.path.join(ROOT, src), "rb") as want,
                ):
                    assert got.read() == want.read(), dst
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mpremote",
                "connect",
                b.port,
                "resume",
                "exec",
                "from fleetwire import MQTTClient; print(MQTTClient('d', '127.0.0.1').port)",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.stdout.strip() == "1883", r.stdout + r.stderr
    finally:
        b.stop()


def test_an_encrypted_mqtt_partition_leaves_the_board_on_the_file_store_saying_why(tmp_path):
    # The ring store clears bits to acknowledge; encrypted flash cannot do that. The
    # board's runner says so and keeps its messages in files instead of failing.
    b = VirtualBoard(str(tmp_path / "vb"), partitions={"mqtt": {"blocks": 16, "encrypted": True}}).start()
    try:
        build.build(b.fs, mpy=True)
        assert wait_for_prompt(b.port)
        code = (
            "import esp32; "
            "print(esp32.Partition.find(esp32.Partition.TYPE_DATA, label='mqtt')[0].info()[5]); "
            "from fleetwire import runner; print(runner.open_store({}))"
        )
        r = subprocess.run(
            [sys.executable, "-m", "mpremote", "connect", b.port, "exec", code],
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = r.stdout.strip().splitlines()
        assert lines[0] == "True", r.stdout + r.stderr
        assert "partition 'mqtt' is encrypted" in lines[1] and "using the file store" in lines[1], lines
        assert lines[2] == "store", lines
    finally:
        b.stop()


def test_the_freeze_manifest_names_the_build_tree():
    calls = []
    env = {
        "include": lambda p: calls.append(("include", p)),
        "package": lambda name, base_path=".", opt=None: calls.append(("package", name, base_path)),
    }
    with open(os.path.join(FIRMWARE, "manifest.py")) as f:
        exec(f.read(), env)
    ((_, name, base),) = [c for c in calls if c[0] == "package"]
    assert name == "fleetwire"
    assert os.path.normpath(os.path.join(FIRMWARE, base)) == os.path.join(ROOT, "build", "board", "lib")


def test_the_partition_table_has_the_mqtt_partition_inside_4mb():
    rows = [
        line.split(",")
        for line in open(os.path.join(FIRMWARE, "partitions-mqtt.csv"))
        if line.strip() and not line.startswith("#")
    ]
    parts = {r[0].strip(): (int(r[3], 16), int(r[4], 16)) for r in rows}
    assert parts["mqtt"][1] == 256 * 1024
    spans = sorted(parts.values())
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:]))  # no overlaps
    assert spans[-1][0] + spans[-1][1] <= 4 * 1024 * 1024
