mosquitto -c broker/mosquitto.conf &
fleetwire deploy --port "$PORT" --config device.json --mpy --ca ~/.fleetwire/ca
fleetwire collect --broker broker.local:8883 --tls-ca creds/ca.pem --cert creds/collector.pem \
    --key creds/collector.key --landing landing/ &
fleetwire ca revoke sensor-17                         # then reload mosquitto: kill -HUP its pid
