# The MQTT 5 codec: properties, reason codes and AUTH, the same source on both interpreters.
from fleetwire.codec import packets5

p = packets5.Publish(
    "fleet/dev-1/cmd", b"reboot", qos=1, packet_id=7, properties={"message_expiry_interval": 30}
)
data = p.encode()
print(data.hex())
print(packets5.decode_all(data) == [p], packets5.Puback(7, 0x10).reason)
try:  # a PUBLISH whose Topic Alias is 0
    packets5.decode_all(bytes.fromhex("3008 0001 74 03 230000 78"))
except packets5.ProtocolError as e:
    print(e, "- DISCONNECT with 0x%02x" % e.code)
