# bench/heap.py's fleetwire.aio program (see heap_device.py for how it runs): the scenario
# with fleetwire's asyncio front, written as the mqtt_as program is (aio+v5: in MQTT 5,
# fleetwire.aio5.AsyncClient).
from heap_device import prog, host, port, inbox, cb, start, step, ready, fail_fast


async def scenario(asyncio, AsyncClient):
    c = AsyncClient(b"heap-aio", host, port, keepalive=60)
    c.set_callback(cb)
    step("construct")
    await c.connect()
    step("connect")
    await c.subscribe(b"bench/in", 1)
    step("subscribe")
    msg = b"x" * 64
    for _i in range(100):
        await c.publish(b"bench/out", msg, False, 1)
    step("publish")
    ready()
    while len(inbox) < 10:
        await asyncio.sleep_ms(5)
    step("receive")
    await c.disconnect()


def main():
    start()
    if prog == "aio+v5":  # MQTT 5
        from fleetwire.aio5 import AsyncClient
    else:
        from fleetwire.aio import AsyncClient
    import asyncio  # loaded by fleetwire.aio: its cost is the client's

    step("import")
    fail_fast(asyncio)
    asyncio.run(scenario(asyncio, AsyncClient))


main()
print("DONE")
