# A stand-in for a board's `machine` module, for mqtt_as on the unix port (bench/heap.py):
# the one function it takes from it (it names the client after the chip's id).


def unique_id():
    return b"\x00\x00\x00\x00\x00\x01"
