# A power cut at every flash operation of a firmware download, on MicroPython: fleetwire.ota.fw
# writes an image into an OTA slot (an emulated NOR flash, host/portable/norflash.py, holding an older
# image), a chunk at a time, erasing each 4 KB block as a write enters it. The power fails at
# operation k, cleanly or half-way (a torn program or erase); the download then resumes from
# the offset on file, and the slot must end up holding exactly the image.
#   micropython fw_cut_program.py IMAGE CHUNK      (in a scratch directory)
# prints "cut k clean|partial resumed_at" per cut and "done ops=N cuts=M resumed_mid=R".
import os
import sys

from norflash import NorFlash, PowerCut

from fleetwire.ota.fw import FirmwareTarget

IMG = open(sys.argv[1], "rb").read()
CH = int(sys.argv[2])
try:
    os.mkdir("ota")
except OSError:
    pass


def old_slot():
    f = NorFlash(8)
    old = bytes((i * 7 + 3) & 0xFF for i in range(len(IMG) + 5000))  # the image before this one
    f.program(0, old)
    return f


PRISTINE = old_slot()


def download(part, resume):
    t = FirmwareTarget(part)
    done = t.open(resume)
    start = done
    while done < len(IMG):
        n = min(CH, len(IMG) - done)
        msg = b"tag-offset.." + IMG[done : done + n]  # as the client hands a chunk over
        t.write(msg, 12, n, done)
        done += n
    t.close()
    return start


def whole(part):
    buf = bytearray(len(IMG))
    part.readblocks(0, buf, 0)
    return bytes(buf) == IMG


f = PRISTINE.copy()
ops0 = f.ops
download(f, False)
total = f.ops - ops0
assert whole(f)
cuts = resumed_mid = 0
for k in range(1, total + 1):
    for partial in (False, True):
        f = PRISTINE.copy()
        f.arm(k, partial, seed=k)
        try:
            download(f, False)
            raise AssertionError("no cut at operation %d of %d" % (k, total))
        except PowerCut:
            pass
        f.power_on()
        start = download(f, True)
        assert whole(f), "cut %d (%s): the slot does not hold the image" % (k, partial)
        cuts += 1
        if start:
            resumed_mid += 1
        print("cut", k, "partial" if partial else "clean", start)
print("done ops=%d cuts=%d resumed_mid=%d" % (total, cuts, resumed_mid))
