"""Fleet analytics on Spark: turn a telemetry landing zone into Parquet tables (clean,
device_window, device_health, firmware_cohort, outliers), report.html with PNG plots, CSV copies
of the small tables and quality.json (what was read and skipped). --input, --out and --checkpoint
take any Hadoop filesystem URI (file:, hdfs:, s3a:, ...); everything is written where --out is.

  fleetwire report --input landing/ --out report/            # local[2]
  fleetwire report --input landing/ --out report/ --incremental   # only what is new
  fleetwire report --master spark://host:7077 --input hdfs://nn:9000/landing --out hdfs://nn:9000/fleet
  spark-submit --master spark://host:7077 .../fleetwire/tools/report.py --input ... --out ...

Exit codes: 0 done, 2 bad input or arguments (the message says what), 1 the job failed.
"""

import sys


def add_arguments(p):
    p.add_argument("--input", required=True, help="landing zone: LANDING/date=YYYY-MM-DD/hour=HH/*.ndjson")
    p.add_argument("--out", required=True, help="output directory (tables, report.html, plots/, csv/)")
    p.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[2]; under spark-submit, the one it was given)",
    )
    p.add_argument(
        "--since",
        default=None,
        help="only records with ts from this time on (ISO 8601 UTC, e.g. 2026-01-05 or 2026-01-05T12:00Z)",
    )
    p.add_argument(
        "--incremental",
        action="store_true",
        help="read only files not seen before and recompute only the hours they touch "
        "(state in --checkpoint and OUT/_state)",
    )
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default OUT/_checkpoint)")
    p.add_argument(
        "--reset",
        action="store_true",
        help="with --incremental: forget what earlier runs saw (the checkpoint, OUT/_staging, "
        "OUT/_state) first, so this run reads everything",
    )
    p.add_argument("--format", choices=("ndjson", "parquet"), default="ndjson", help="input file format")
    p.add_argument(
        "--silent-after",
        type=float,
        default=30,
        help="minutes without a record before the newest one that make a device silent (default 30)",
    )
    p.add_argument("--no-report", action="store_true", help="write the tables only")
    p.add_argument(
        "--symbols",
        default=None,
        metavar="DIR",
        help="a directory of release symbol maps (`fleetwire bundle` writes <bundle>.symbols.json): "
        "crash signatures name the function the map says",
    )
    p.add_argument(
        "--packages",
        default=None,
        help="Maven coordinates of JARs to add (comma-separated), e.g. "
        "org.apache.hadoop:hadoop-aws:3.5.0 for s3a:// URIs (as spark-submit --packages)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.executor.memory=8g (repeatable; as spark-submit --conf)",
    )
    p.add_argument("--debug", action="store_true", help="on failure, print the full (Java) stack trace")


def run(args):
    from fleetwire.host.analytics import generator, job, landing, storage

    try:
        since = generator.parse_time(args.since) if args.since else None
    except ValueError:
        print("fleetwire report: error: --since %r is not an ISO 8601 time" % args.since, file=sys.stderr)
        return 2
    if args.reset and not args.incremental:
        print("fleetwire report: error: --reset goes with --incremental", file=sys.stderr)
        return 2
    if any("=" not in kv for kv in args.conf):
        print("fleetwire report: error: --conf takes KEY=VALUE", file=sys.stderr)
        return 2
    extra = dict(kv.split("=", 1) for kv in args.conf)
    if args.packages:
        extra["spark.jars.packages"] = args.packages
    try:
        res = job.report(
            args.input,
            args.out,
            args.master,
            extra,
            fmt=args.format,
            since_ms=since,
            incremental=args.incremental,
            checkpoint=args.checkpoint,
            reset=args.reset,
            silent_after_s=int(args.silent_after * 60),
            report=not args.no_report,
            symbols=args.symbols,
            log=lambda m: print(m, flush=True),
        )
    except landing.InputError as e:  # a missing or empty landing zone: before a JVM starts
        print("fleetwire report: error: %s" % e, file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a Spark/Java failure: one clear line, the trace on request
        if args.debug:
            raise
        print("fleetwire report: the Spark job failed: %s" % _first_line(e), file=sys.stderr)
        print("(run again with --debug for the full stack trace)", file=sys.stderr)
        return 1
    print("wrote %s in %.1f s: %s" % (args.out, res.seconds, ", ".join(sorted(res.tables))))
    if res.report:
        print("report: %s" % (storage.local_path(res.report) if storage.is_local(res.report) else res.report))
    return 0


def _first_line(e):
    text = str(e).strip() or type(e).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "Traceback", "---")):
            return "%s: %s" % (type(e).__name__, line[:500])
    return type(e).__name__


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(
        prog="fleetwire report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":  # spark-submit .../fleetwire/tools/report.py --input ... --out ...
    sys.exit(main())
