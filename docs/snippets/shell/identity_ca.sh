fleetwire ca init                                     # the fleet CA, in ~/.fleetwire/ca (or --ca DIR, $FLEETWIRE_CA)
fleetwire broker-config --host broker.local --out broker/ --max-connections 12000   # + systemd-limits.conf
fleetwire ca issue collector --role collector --out creds/
fleetwire ca issue operator --role operator --out creds/
fleetwire ca list
