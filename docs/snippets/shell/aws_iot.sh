fleetwire deploy --port "$PORT" --config device.json --mpy \
    --cert 1a2b-certificate.pem.crt --key 1a2b-private.pem.key --broker-ca AmazonRootCA1.pem
