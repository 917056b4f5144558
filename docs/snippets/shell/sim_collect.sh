fleetwire collect --broker 127.0.0.1:1883 --landing landing/ &   # lands fleet/+/telemetry
fleetwire sim --devices 20 --workers 2 --broker 127.0.0.1:1883 --period 60 --speed 120 --duration 5 \
    --landing landing/                                           # its own lag goes to landing/_sim/
kill %1; wait                                                    # the collector closes its files
