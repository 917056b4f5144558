fleetwire build --mpy --out build/board
MICROPYPATH=build/board/lib:.frozen micropython -X heapsize=96K -c "from fleetwire import MQTTClient; print(MQTTClient)"
fleetwire selfcheck
