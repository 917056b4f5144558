# PORT: the board's serial port (/dev/ttyUSB0); FIRMWARE: a MicroPython release for it
fleetwire flash --port "$PORT" --firmware "$FIRMWARE" --partitions firmware/partitions-mqtt.csv
mpremote connect "$PORT" fs cp app.py :app.py
fleetwire deploy --port "$PORT" --config device.json --mpy --no-reset
fleetwire console --port "$PORT" --reset --until "app: ready" --timeout 60
