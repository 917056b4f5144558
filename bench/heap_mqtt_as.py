# bench/heap.py's mqtt_as program (see heap_device.py for how it runs): the scenario with
# peterhinch's asyncio client, its Wi-Fi and chip id from the stand-ins in bench/standins/.
from heap_device import host, port, inbox, cb, start, step, ready, fail_fast


async def scenario(asyncio, MQTTClient, config):
    config["server"] = host
    config["port"] = port
    config["client_id"] = b"heap-mqtt_as"
    config["ssid"] = config["wifi_pw"] = "bench"  # its Wi-Fi step's arguments (no ESP8266 here)
    config["keepalive"] = 60
    config["subs_cb"] = cb
    c = MQTTClient(config)
    step("construct")
    await c.connect(quick=True)  # quick: without its 5 s of Wi-Fi checks, as a battery app does
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
    import network  # noqa: F401  a board has these built in: loaded before the start
    import machine  # noqa: F401

    start()
    from mqtt_as import MQTTClient, config
    import asyncio  # loaded by mqtt_as: its cost is the client's

    step("import")
    fail_fast(asyncio)
    asyncio.run(scenario(asyncio, MQTTClient, config))


main()
print("DONE")
