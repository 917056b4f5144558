# fleetwire.codec: MQTT 3.1.1 encoding and decoding, topic rules and framing.
# One source for MicroPython and CPython. Modules, lowest first:
#   errors  - CodecError, the only exception malformed input raises
#   reasons - error texts and packet type names, loaded when an error is raised
#   text    - MQTT string rules (UTF-8)
#   topics  - topic name/filter validation and matching
#   wire    - packet types, fixed header, zero-allocation packers for a client
#   stream  - PacketReader: incremental, bounded framing into one fixed buffer
#   packets - all 14 packet types as objects, both directions
# Kept empty so that importing one module does not load the others on a board.
