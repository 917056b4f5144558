fleetwire release rotate                        # a new key joins the set and signs from now on
fleetwire release publish --broker broker.local:8883 --tls-ca creds/ca.pem --cert creds/operator.pem \
    --key creds/operator.key --devices fleet.txt   # boards take the new key and keep the old
fleetwire release retire                        # then the old key goes (this update is signed by it)
fleetwire release publish --broker broker.local:8883 --tls-ca creds/ca.pem --cert creds/operator.pem \
    --key creds/operator.key --devices fleet.txt
fleetwire release list
