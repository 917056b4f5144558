"""The telemetry record as a board's vitals agent publishes it (fleetwire.vitals) and the
collector lands it: its fields with their JSON types, and those a record cannot be placed
without. The fleet analytics read the same (fleetwire.host.analytics.schema)."""

# (field, type) in the order the generator writes them. "long" is a JSON integer,
# "double" any JSON number, "string" a JSON string.
FIELDS = [
    ("device_id", "string"),
    ("fw_version", "string"),
    ("boot_id", "long"),
    ("ts", "long"),  # epoch ms, device clock
    ("seq", "long"),  # lifetime counter, never resets
    ("uptime_s", "long"),
    ("heap_free", "long"),
    ("heap_min", "long"),
    ("rssi", "long"),
    ("vbat_mv", "long"),  # null on mains-powered boards
    ("reconnects", "long"),  # lifetime counter
    ("publish_fail", "long"),  # lifetime counter
    ("queue_drops", "long"),  # lifetime counter
    ("queue_depth", "long"),
    ("store_used", "long"),
    ("publish_latency_ms", "double"),
    ("reset_cause", "string"),  # only on the first record after a boot
    ("period_s", "long"),  # the device's reporting period
    ("rx_ts", "long"),  # epoch ms, added by the collector
]
FIELD_NAMES = [f for f, _ in FIELDS]

# A record without one of these cannot be placed (device, order, time, release, expected rate).
REQUIRED = ["device_id", "seq", "ts", "boot_id", "fw_version", "period_s"]
