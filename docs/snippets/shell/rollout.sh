fleetwire release init                                # once: the fleet's release-signing key, in ~/.fleetwire/release
fleetwire bundle --version 1.5.0 --app app.py --out app-1.5.0.fwb   # the board tree (.mpy) and your app
fleetwire rollout --broker broker.local:8883 --tls-ca ca.pem --cert operator.pem --key operator.key \
    --release-keys ~/.fleetwire/release --release app-1.5.0.fwb --devices fleet.txt \
    --stages 5%,25%,100% --landing landing/ --soak 3600 --max-crash-free-drop 1 --rollback-on-halt
