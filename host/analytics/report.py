"""report.html: the fleet's health for people. PNG plots (plots/*.png) and CSV copies of the
small tables (csv/*.csv) sit beside it and are linked relatively, so the directory can be
opened in a browser from disk or copied anywhere. Everything is rendered in memory and written
where the tables are (storage.py), on whatever filesystem that is."""

import datetime as dt
import html
import io

from fleetwire.host.analytics import landing, storage
from fleetwire.host.analytics import schema as S

WORST = 15
TOP_CRASHES = 5  # signatures a release shows under "Why boards crash"


def _version_sort(versions):
    """Releases in the order a board takes them (fleetwire.ota.trust.older, as the tables'
    metrics.version_key); equals by their text."""
    import functools

    from fleetwire.ota.trust import older

    def cmp(a, b):
        return -1 if older(a, b) else 1 if older(b, a) else 0

    return sorted(sorted(map(str, versions)), key=functools.cmp_to_key(cmp))


def collect(spark, out, fleet, hist):
    """The small frames the report shows (pandas), from the written small tables, metrics.fleet_hourly
    and the histogram partials."""
    from pyspark.sql import functions as F

    d = {
        n: spark.read.parquet(storage.join(out, n)).toPandas()
        for n in (
            "firmware_cohort",
            "outliers",
            "device_health",
            "crash_signatures",
            "crash_releases",
            "commands",
            "convergence",
        )
    }
    d["fleet_hourly"] = fleet.orderBy("hour_ms", "fw_version").toPandas()
    d["fleet_hourly"].insert(
        0,
        "hour",
        d["fleet_hourly"]["hour_ms"].map(
            lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:00")
        ),
    )
    d["rssi_histogram"] = (
        hist.filter(F.col("metric") == "rssi")
        .groupBy("fw_version", "value")
        .agg(F.sum("n").alias("count"))
        .select("fw_version", F.col("value").cast("long").alias("rssi"), "count")
        .orderBy("fw_version", "rssi")
        .toPandas()
    )
    return d


def plots(d):
    """{name: (file name, PNG bytes)}"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    made = {}
    versions = _version_sort(d["firmware_cohort"]["fw_version"].tolist())
    colors = {v: plt.cm.tab10(i % 10) for i, v in enumerate(versions)}

    h = d["fleet_hourly"].copy()
    h["t"] = pd.to_datetime(h["hour_ms"], unit="ms", utc=True)
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for v in versions:
        s = h[h["fw_version"] == v]
        a1.plot(s["t"], 100 * s["mean_coverage"], marker=".", label=v, color=colors[v])
        a2.plot(s["t"], 100 * s["mean_loss_rate"], marker=".", label=v, color=colors[v])
    a1.set_ylabel("coverage %")
    a1.set_title("Coverage and loss per hour, by firmware (mean over 5-minute device windows)")
    a2.set_ylabel("loss %")
    a2.set_xlabel("hour (UTC)")
    a1.legend(title="firmware")
    a1.grid(alpha=0.3)
    a2.grid(alpha=0.3)
    fig.autofmt_xdate()
    made["coverage_loss"] = _png(fig, "coverage_loss.png")

    c = d["firmware_cohort"].set_index("fw_version").loc[versions]
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(versions, c["crash_free_hours_pct"], color=[colors[v] for v in versions])
    lo = max(0.0, float(c["crash_free_hours_pct"].min()) - 5)
    ax.set_ylim(lo, 100.5)
    for b, val, n in zip(bars, c["crash_free_hours_pct"], c["device_hours"]):
        ax.annotate(
            "%.2f%%\n%d dev-h" % (val, n),
            (b.get_x() + b.get_width() / 2, val),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel("crash-free hours %")
    ax.set_title("Crash-free device-hours by release")
    made["crash_free"] = _png(fig, "crash_free.png")

    r = d["rssi_histogram"]
    fig, ax = plt.subplots(figsize=(8, 4))
    for v in versions:
        s = r[r["fw_version"] == v]
        if len(s):
            ax.step(s["rssi"], 100 * s["count"] / s["count"].sum(), where="mid", label=v, color=colors[v])
    ax.set_xlabel("RSSI (dBm)")
    ax.set_ylabel("% of records")
    ax.set_title("RSSI distribution by firmware")
    ax.legend(title="firmware")
    ax.grid(alpha=0.3)
    made["rssi"] = _png(fig, "rssi.png")

    w = worst_devices(d["device_health"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.35 * max(len(w), 4) + 1.5), sharey=True)
    labels = [
        ("%s (%s)%s" % (x.device_id, x.fw_version, " silent" if x.silent else "")) for x in w.itertuples()
    ]
    for ax, col, title in (
        (axes[0], "crash_free_hours_pct", "crash-free hours %"),
        (axes[1], "loss_rate", "loss rate"),
        (axes[2], "coverage", "coverage"),
    ):
        ax.barh(labels, w[col], color=[colors.get(v, "grey") for v in w["fw_version"]])
        ax.set_title(title)
        ax.grid(alpha=0.3, axis="x")
    axes[0].invert_yaxis()
    fig.suptitle("Worst devices (fewest crash-free hours, then highest loss)")
    made["worst_devices"] = _png(fig, "worst_devices.png")
    return made


def worst_devices(health, n=WORST):
    return health.sort_values(
        ["crash_free_hours_pct", "loss_rate", "device_id"], ascending=[True, False, True]
    ).head(n)


def _png(fig, name):
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return name, buf.getvalue()


def write(spark, store, out, fleet, hist, quality):
    """Write OUT/report.html, OUT/plots/*.png and OUT/csv/*.csv; returns the HTML's URI."""
    d = collect(spark, out, fleet, hist)
    csvs = {}
    for name in (
        "firmware_cohort",
        "outliers",
        "device_health",
        "fleet_hourly",
        "rssi_histogram",
        "crash_signatures",
        "crash_releases",
        "commands",
        "convergence",
    ):
        csvs[name] = "csv/%s.csv" % name
        store.write_text(storage.join(out, csvs[name]), d[name].to_csv(index=False))
    pngs = {}
    for key, (name, data) in plots(d).items():
        pngs[key] = "plots/" + name
        store.write_bytes(storage.join(out, pngs[key]), data)
    path = storage.join(out, "report.html")
    store.write_text(path, render(d, pngs, csvs, quality))
    return path


# What a person reads above a column where its name with spaces for underscores would not do (the
# CSV copies and the tables keep the names: each heading's tooltip). Headings must wrap between
# words: the names, one unbreakable word each, made the releases table 2271 px wide at 1366.
LABELS = {
    "fw_version": "release",
    "device_id": "device",
    "device_hours": "device-hours",
    "crash_free_hours": "crash-free hours",
    "crash_free_hours_pct": "crash-free hours %",
    "rssi_p05": "RSSI p5 dBm",
    "rssi_p50": "RSSI p50 dBm",
    "latency_p50": "latency p50 ms",
    "latency_p95": "latency p95 ms",
    "mean_coverage": "coverage (mean)",
    "mean_loss_rate": "loss rate (mean)",
    "reconnects_per_device_hour": "reconnects per device-hour",
    "prev_fw_version": "previous release",
    "crash_free_hours_pct_delta": "crash-free hours % vs previous",
    "mean_loss_rate_delta": "loss rate vs previous",
    "heap_leak_bytes_per_hour": "heap leak B/h",
    "vbat_drop_per_hour": "battery drop mV/h",
    "cohort_median": "release median",
    "cohort_mad": "release MAD",
    "cohort_devices": "release devices",
}


def _cell(v, floats):
    import pandas as pd

    if pd.isna(v):  # None, NaN and NaT alike: an empty cell
        return ""
    if isinstance(v, float):
        return floats % v
    if isinstance(v, pd.Timestamp):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


def _table(df, floats="%.4g"):
    """df as an HTML table in a box of its own that scrolls sideways when the table is wider than
    the screen (a phone's), so that the page itself never does."""
    e = html.escape
    head = "".join(
        "<th title='%s'>%s</th>" % (e(c), e(LABELS.get(c, c.replace("_", " ")))) for c in df.columns
    )
    rows = "".join(
        "<tr>%s</tr>" % "".join("<td>%s</td>" % e(_cell(v, floats)) for v in row)
        for row in df.itertuples(index=False, name=None)
    )
    table = "<table class='t'><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (head, rows)
    return "<div class='scroll'>%s</div>" % table


def _without_empty(df):
    """df without its columns that hold no value at all -> (df, the names left out)."""
    empty = [c for c in df.columns if df[c].isna().all()]
    return df.drop(columns=empty), empty


# The width= meta makes a phone lay the page out at its own width (without it, at 980 px, shrunk).
# Each table scrolls inside its .scroll box, its first column (the release, the device) staying in
# sight; headings wrap between words.
CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 2em;max-width:1200px;color:#222}
@media (max-width:600px){body{margin:1em auto;padding:0 .75em}}
.scroll{overflow-x:auto;margin:.5em 0 1.5em}
table.t{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
table.t td,table.t th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:right}
table.t th{background:#f4f4f4;vertical-align:bottom;font-size:12px}
table.t td:first-child,table.t th:first-child{position:sticky;left:0;text-align:left;background:#fff}
table.t th:first-child{background:#f4f4f4}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
img{max-width:100%;height:auto;border:1px solid #eee;margin:.5em 0}
.note{color:#666;font-size:13px}"""

# publish_latency_ms is null in records that cannot carry a real figure (a fleet simulator running
# faster than real time measures the round trip on the real clock: fleetwire.host.fleet.device)
NO_LATENCY = (
    "<p class='note'>Publish latency is left out: no record carries one. Boards measure it; the fleet "
    "simulator does not when it compresses time (<code>fleetwire demo</code>): its devices' round "
    "trips run on the real clock.</p>"
)


def crashes(d, top=TOP_CRASHES):
    """The "Why boards crash" section: per release (newest first), its crash-free devices and its
    top signatures, each with a sample traceback and log tail."""
    from fleetwire.host.analytics.crashes import named

    e = html.escape
    sig, rel = d["crash_signatures"], d["crash_releases"]
    if not len(sig):
        return "<p>No crash records.</p>"
    out = []
    free = {r["fw_version"]: r for r in rel.to_dict("records")}
    for v in reversed(_version_sort(sig["fw_version"].unique().tolist())):
        r = free.get(v, {})
        out.append(
            "<h3>%s</h3><p class='note'>%s of %s devices crashed (crash-free devices %s %%)</p>"
            % (
                e(str(v)),
                e(_cell(r.get("crashed_devices"), "%d")),
                e(_cell(r.get("devices"), "%d")),
                e(_cell(r.get("crash_free_devices_pct"), "%.1f")),
            )
        )
        mine = sig[sig["fw_version"] == v].sort_values(
            ["devices", "crashes", "signature"], ascending=[False, False, True]
        )
        for row in mine.head(top).to_dict("records"):
            out.append(
                "<details><summary><code>%s</code>: %d devices, %d crashes</summary>"
                "<pre>%s</pre><p class='note'>log</p><pre>%s</pre></details>"
                % (
                    e(named(row)),
                    row["devices"],
                    row["crashes"],
                    e(row["sample_traceback"] or ""),
                    e(row["sample_log"] or ""),
                )
            )
    return "\n".join(out)


def commands(d):
    """The "Commands and desired state" section: the commands table, and how long each change of
    desired state took to reach its boards."""
    cmds, conv = d.get("commands"), d.get("convergence")
    if (cmds is None or not len(cmds)) and (conv is None or not len(conv)):
        return (
            "<p>None landed (<code>fleetwire collect --commands</code> lands the boards' answers and "
            "reported states, <code>fleetwire cmd --landing</code> and <code>fleetwire state set "
            "--landing</code> what was sent).</p>"
        )
    out = []
    if cmds is not None and len(cmds):
        out.append(_table(cmds.sort_values(["name", "fw_version"], na_position="last")))
    if conv is not None and len(conv):
        conv = conv.sort_values("set_ts").copy()
        conv.insert(
            1,
            "set",
            conv.pop("set_ts").map(
                lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            ),
        )
        out.append("<p class='note'>Desired state: per change, the boards that reported it, and when.</p>")
        out.append(_table(conv))
    return "\n".join(out)


def render(d, pngs, csvs, quality):
    e = html.escape
    h = d["device_health"]
    cohort = (
        d["firmware_cohort"]
        .set_index("fw_version")
        .loc[_version_sort(d["firmware_cohort"]["fw_version"].tolist())]
        .reset_index()
    )
    # the counts behind two of its rates (crash-free hours, reconnects) stay in the CSV: with them
    # the table was wider than a laptop's page
    cohort, unmeasured = _without_empty(cohort.drop(columns=["crash_free_hours", "reconnects"]))
    silent = h[h["silent"]].sort_values("last_seen")[["device_id", "fw_version", "last_seen", "coverage"]]
    worst = worst_devices(h)[
        [
            "device_id",
            "fw_version",
            "crash_free_hours_pct",
            "unexpected_resets",
            "reboots",
            "loss_rate",
            "coverage",
            "reconnects",
            "heap_leak_bytes_per_hour",
            "vbat_drop_per_hour",
            "silent",
        ]
    ]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>fleetwire fleet report</title>",
        "<style>%s</style></head><body>" % CSS,
        "<h1>Fleet report</h1>",
        "<p class='note'>%d devices, %d distinct records; generated %s by <code>fleetwire report</code>.</p>"
        % (
            len(h),
            quality.get("clean_records", 0),
            e(dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ),
        "<h2>Input</h2><pre>%s</pre>" % e("\n".join(landing.describe(quality))),
        "<h2>Releases</h2>",
        _table(cohort),
        NO_LATENCY if {"latency_p50", "latency_p95"} <= set(unmeasured) else "",
        "<img src='%s' alt='crash-free hours by release'>" % e(pngs["crash_free"]),
        "<img src='%s' alt='coverage and loss over time per firmware'>" % e(pngs["coverage_loss"]),
        "<img src='%s' alt='RSSI distribution'>" % e(pngs["rssi"]),
        "<h2>Worst devices</h2>",
        _table(worst),
        "<img src='%s' alt='worst devices'>" % e(pngs["worst_devices"]),
        "<h2>Outliers</h2><p class='note'>Devices worse than their release's cohort: modified z-score "
        "(median absolute deviation) above %.1f on %s.</p>" % (S.OUTLIER_Z, e(", ".join(S.OUTLIER_METRICS))),
        _table(d["outliers"].sort_values("score", ascending=False)) if len(d["outliers"]) else "<p>None.</p>",
        "<h2>Why boards crash</h2><p class='note'>Crash records the boards sent after the reset, by "
        "signature: the exception and its innermost frame.</p>",
        crashes(d),
        "<h2>Commands and desired state</h2>",
        commands(d),
        "<h2>Silent devices</h2><p class='note'>No record in the last %d minutes of the data.</p>"
        % (S.SILENT_AFTER_S // 60),
        _table(silent) if len(silent) else "<p>None.</p>",
        "<h2>Data</h2><ul>",
    ]
    for name, rel in csvs.items():
        parts.append("<li><a href='%s'>%s</a></li>" % (e(rel), e(name + ".csv")))
    parts.append("</ul><p class='note'>Full tables (Parquet): %s.</p></body></html>" % e(", ".join(S.TABLES)))
    return "\n".join(parts)
