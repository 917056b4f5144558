"""Write a synthetic landing zone of device telemetry (hourly NDJSON files, as the collector
lands them): loss, QoS1 duplicates, a broker outage, reboots (release 1.5.0 crashes more), an
OTA rollout to 1.5.1, leaking heaps, battery drain and devices going silent.

  fleetwire gen-telemetry --devices 200 --hours 24 --out landing/
"""


def add_arguments(p):
    p.add_argument("--devices", type=int, default=50, help="number of devices (default 50)")
    p.add_argument("--hours", type=float, default=24, help="hours of data (default 24)")
    p.add_argument("--out", required=True, help="landing zone directory (LANDING/date=.../hour=.../*.ndjson)")
    p.add_argument("--seed", type=int, default=7, help="random seed (default 7): same seed, same data")
    p.add_argument(
        "--start", default=None, help="first timestamp, ISO 8601 UTC (default 2026-01-05T00:00:00Z)"
    )
    p.add_argument(
        "--format",
        choices=("ndjson", "parquet"),
        default="ndjson",
        help="file format (default ndjson; parquet for benchmarks)",
    )


def run(args):
    import sys

    from fleetwire.host.analytics import generator

    if args.devices < 1 or args.hours <= 0:
        print("fleetwire gen-telemetry: --devices and --hours must be positive", file=sys.stderr)
        return 2
    df = generator.generate(
        devices=args.devices, hours=args.hours, seed=args.seed, start=args.start or generator.DEFAULT_START
    )
    files = generator.write_landing(df, args.out, args.format)
    print(
        "wrote %d records (%d devices, %g hours) in %d files under %s"
        % (len(df), args.devices, args.hours, len(files), args.out)
    )
    return 0
