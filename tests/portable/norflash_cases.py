# The NOR-flash emulator behaves like the real part where power-loss safety
# depends on it. Portable: CPython and the MicroPython unix port.

import sys

try:
    from fleetwire.host.portable.norflash import NorFlash, PowerCut, FlashMisuse
except ImportError:  # MicroPython: host code is not in the board tree
    from norflash import NorFlash, PowerCut, FlashMisuse

from run import raises

# On MicroPython (tests/portable/test_portable.py): the heap, and the modules it imports by
# their bare names (beside it, or fleetwire.host.portable's), compiled with it.
HEAP = "96K"
ALSO = ("norflash",)

MP = sys.implementation.name == "micropython"


def read(fl, addr, n):
    b = bytearray(n)
    fl.readblocks(addr // fl.block_size, b, addr % fl.block_size)
    return bytes(b)


def test_a_new_flash_reads_erased():
    fl = NorFlash(4)
    assert read(fl, 0, 8) == b"\xff" * 8
    assert fl.ioctl(4, 0) == 4 and fl.ioctl(5, 0) == 4096


def test_programming_clears_bits_and_counts_bytes():
    fl = NorFlash(2)
    fl.writeblocks(0, b"\x0f\xf0", 10)
    assert read(fl, 10, 2) == b"\x0f\xf0"
    fl.writeblocks(0, b"\x07", 10)  # clearing more bits is allowed
    assert read(fl, 10, 1) == b"\x07"
    assert fl.programmed == 3


def test_programming_a_one_over_a_zero_is_refused():
    fl = NorFlash(2)
    fl.writeblocks(0, b"\x00", 0)
    e = raises(FlashMisuse, fl.writeblocks, 0, b"\x01", 0)
    assert "only clear bits" in str(e)


def test_erase_sets_a_whole_block_to_ff_and_is_counted():
    fl = NorFlash(3)
    fl.writeblocks(1, b"\x00" * 16, 100)
    fl.ioctl(6, 1)
    assert read(fl, 4096 + 100, 16) == b"\xff" * 16
    assert fl.erases == [0, 1, 0]


def test_the_simple_protocol_erases_before_writing():
    fl = NorFlash(2)
    fl.writeblocks(0, b"\x00" * 4096, 0)
    fl.writeblocks(0, b"\xaa" * 4096)
    assert read(fl, 0, 4) == b"\xaa" * 4 and fl.erases[0] == 1


def test_a_power_cut_strikes_at_the_armed_operation_and_stays():
    fl = NorFlash(2)
    fl.arm(2)
    fl.writeblocks(0, b"\x01", 0)
    raises(PowerCut, fl.writeblocks, 0, b"\x02", 1)
    assert read(fl, 1, 1) == b"\xff"  # a complete cut: nothing of it landed
    raises(PowerCut, fl.ioctl, 6, 0)
    fl.power_on()
    fl.writeblocks(0, b"\x03", 2)
    assert read(fl, 0, 3) == b"\x01\xff\x03"


def test_a_partial_program_lands_a_prefix_only():
    seen = set()
    for seed in range(1, 40):
        fl = NorFlash(1)
        fl.arm(1, partial=True, seed=seed)
        raises(PowerCut, fl.writeblocks, 0, b"\x00" * 8, 0)
        got = read(fl, 0, 8)
        k = 0
        while k < 8 and got[k] == 0:
            k += 1
        assert all(b == 0xFF for b in got[k + 1 :]), got
        seen.add(k)
    assert len(seen) > 3  # the cut point varies with the seed


def test_a_torn_erase_leaves_the_block_neither_old_nor_erased():
    torn = 0
    for seed in range(1, 20):
        fl = NorFlash(1)
        fl.writeblocks(0, b"\x00" * 4096, 0)
        fl.arm(1, partial=True, seed=seed)
        raises(PowerCut, fl.ioctl, 6, 0)
        got = read(fl, 0, 4096)
        if 0 < got.count(b"\xff") < 4096:
            torn += 1
        assert fl.erases[0] == 0  # an interrupted erase is no erase
    assert torn > 10


def test_a_file_backed_flash_survives_a_power_cycle():
    path = "/tmp/fw-norflash-test-%d.img" % (id(read) & 0xFFFF)
    fl = NorFlash(2, path=path)
    fl.writeblocks(1, b"kept", 0)
    again = NorFlash(2, path=path)
    assert read(again, 4096, 4) == b"kept"
    import os

    os.remove(path)


def test_littlefs_mounts_on_it():
    if not MP:
        return  # VfsLfs2 is MicroPython's
    import vfs

    fl = NorFlash(8)
    vfs.VfsLfs2.mkfs(fl)
    fs = vfs.VfsLfs2(fl)
    vfs.mount(fs, "/fwflash")
    with open("/fwflash/x.txt", "w") as f:
        f.write("littlefs on emulated NOR")
    with open("/fwflash/x.txt") as f:
        assert f.read() == "littlefs on emulated NOR"
    vfs.umount("/fwflash")
    assert fl.programmed > 0 and sum(fl.erases) > 0


def test_a_cut_copy_is_the_flash_an_armed_cut_leaves():
    # The sweep forks at an operation instead of arming a cut there: the copy must hold
    # exactly what the armed cut would leave, whole or half done, for programs and erases.
    for seed in range(1, 12):
        for partial in (False, True):
            for op in ("p", "e"):
                armed = NorFlash(2, block_size=64)
                watched = NorFlash(2, block_size=64)
                copies = []
                for fl in (armed, watched):
                    fl.writeblocks(0, b"\x0f" * 64, 0)
                watched.watch = lambda o, where, buf, fl=watched, c=copies, p=partial, s=seed: c.append(
                    fl.cut_copy(o, where, buf, p, s)
                )
                armed.arm(1, partial, seed)
                if op == "p":
                    raises(PowerCut, armed.writeblocks, 1, b"\x00\x11\x22\x33\x44\x55", 7)
                    watched.writeblocks(1, b"\x00\x11\x22\x33\x44\x55", 7)
                else:
                    raises(PowerCut, armed.ioctl, 6, 0)
                    watched.ioctl(6, 0)
                assert len(copies) == 1
                assert copies[0].data == armed.data, (seed, partial, op)
                if op == "p":  # and the watched flash itself went on uncut
                    assert read(watched, 64 + 7, 6) == b"\x00\x11\x22\x33\x44\x55"
                else:
                    assert read(watched, 0, 64) == b"\xff" * 64


def test_watch_sees_each_program_and_erase_before_it_lands():
    fl = NorFlash(2, block_size=64)
    seen = []
    fl.watch = lambda op, where, buf: seen.append((op, where, bytes(buf) if buf else None, read(fl, 70, 1)))
    fl.writeblocks(1, b"\x01", 6)
    fl.ioctl(6, 1)
    assert seen == [("p", 70, b"\x01", b"\xff"), ("e", 1, None, b"\x01")]
