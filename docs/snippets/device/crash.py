# Crash capture in a program of its own (fleetwire.runner does all of this by itself)
from fleetwire import MQTTClient, crash, crashrun, crashsend

crashrun.install("1.0.0", boot=1, lines=4, width=48, size=768)  # all it will need, now
crashsend.keep()  # the last boot's record, if any: from RTC memory to flash
client = MQTTClient("sensor-17", "broker.local", keepalive=30)
client.connect()
sender = crashsend.Sender(client, "sensor-17")  # fleet/sensor-17/crash, QoS 1
while sender.left:  # each record once; its file goes when the broker has it
    sender.step()
    client.loop(100)
sender = sender.close()


def average(readings):
    crash.log("averaging %d readings" % len(readings))
    return sum(readings) // len(readings)


def main():
    print(average([]))  # no readings yet: a ZeroDivisionError nobody catches


crashrun.run(main)  # an exception out of main() is recorded, then the board reset
