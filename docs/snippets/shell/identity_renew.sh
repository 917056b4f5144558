fleetwire ca serve --broker broker.local:8883 --tls-ca creds/ca.pem --cert creds/operator.pem \
    --key creds/operator.key --reload "systemctl reload mosquitto" &
fleetwire ca order sensor-17 --broker broker.local:8883 --tls-ca creds/ca.pem \
    --cert creds/operator.pem --key creds/operator.key   # renew now, whatever its dates
