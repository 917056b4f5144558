fleetwire vboard --count 2 --link /tmp/board   # /tmp/board1, /tmp/board2; runs until Ctrl-C
# in another terminal, as with a board on /dev/ttyUSB0:
mpremote connect /tmp/board1 exec "import machine; print(machine.unique_id())"
