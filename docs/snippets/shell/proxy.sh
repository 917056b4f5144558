fleetwire proxy --listen 127.0.0.1:1884 --upstream 127.0.0.1:1883 --script chaos.txt
