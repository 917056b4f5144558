fleetwire gen-telemetry --devices 20 --hours 2 --out landing/   # a synthetic fleet, with faults
fleetwire report --input landing/ --out report/                 # Spark on local[2]
