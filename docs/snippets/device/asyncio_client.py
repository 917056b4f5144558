# asyncio, the mqtt_as way: an await suspends only the task that waits.
import asyncio

from fleetwire.aio import AsyncClient


async def main():
    got = asyncio.Event()
    c = AsyncClient("sensor-17", "broker.local", keepalive=60)
    c.set_callback(lambda topic, msg: got.set())
    await c.connect()
    await c.subscribe("fleet/sensor-17/cmd/#", 1)
    await c.publish("fleet/sensor-17/cmd/led", b"on", qos=2)  # returns once PUBCOMP is in
    await asyncio.wait_for(got.wait(), 10)
    await c.disconnect()
    print("round trip done")


asyncio.run(main())
