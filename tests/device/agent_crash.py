# The crash record commands of tests/device/agent.py, loaded by the first of them (the
# agent's own bytecode shares the device's heap with the client under test).


class Keeper:
    # RTC memory that keeps nothing: the record goes to flash from the buffer
    def memory(self, b=None):
        return b""


def run(cmd, c, drive):
    op = cmd["op"]
    if op == "crash_rec":
        # a crash record waiting on flash in cmd["d"], as a boot after a crash leaves it
        from fleetwire import crash, crashsend

        if crash._w.t is None:
            crashsend.install(crash._w, "9.9.9", 0, 2, 16, 512)
            crash._w.r = Keeper()
        crashsend._put(crash._w.t, 8, cmd["boot"], 4)
        try:
            crash.log(str(1 // cmd.get("zero", 0)))
        except ZeroDivisionError as e:
            crash.catch(e)
        crashsend._write(cmd["d"], crash._w.t)
        return {}
    if op == "crash_send":
        # the runner's part: send what waits, one record at a time, until all are acknowledged
        from fleetwire.crashsend import Sender

        s = Sender(c, cmd["id"], cmd["d"])
        for _ in range(cmd.get("ms", 10000) // 10):
            s.step()
            if not s.left:
                break
            drive(10)
        s.close()
        return {"left": s.left}
    raise ValueError("unknown op " + op)
