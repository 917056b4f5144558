pytest tests/hil                                         # on a virtual board
pytest tests/hil --board /dev/ttyUSB0 --board-broker 192.168.1.10:8883 \
    --board-ca ~/.fleetwire/ca --board-wifi-ssid workshop # on a real one
