# fleetwire.codec: MQTT 3.1.1 encoding and decoding, topic rules and framing.
# One source for MicroPython and CPython. Modules, lowest first:
#   wire    - what a client needs, the one module the device client loads: CodecError,
#             packet types, the fixed header, zero-allocation packers, readers of the
#             packets a client receives, topic name/filter and UTF-8 checks (bytes-like)
#   reasons - error texts and packet type names, loaded only when an error is raised
#   errors  - CodecError, the only exception malformed input raises (defined in wire)
#   text    - MQTT string rules for str or bytes (wire's check, plus encoding)
#   topics  - topic name/filter validation for str or bytes, and matching
#   stream  - PacketReader: incremental, bounded framing into one fixed buffer
#   packets - all 14 packet types as objects, both directions
# Kept empty so that importing one module does not load the others on a board.
