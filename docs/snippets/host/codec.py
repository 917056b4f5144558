# The codec: the same source on MicroPython and CPython.
from fleetwire.codec import errors, packets

pkts = packets.decode_all(bytes.fromhex("3209 0003612f62 0007 6869"))
print(pkts)
print(pkts[0].encode().hex())
try:
    packets.decode_all(bytes.fromhex("3609 0003612f62 0007 6869"))  # QoS 3
except errors.CodecError as e:
    print(errors.rule(e), "-", e)
