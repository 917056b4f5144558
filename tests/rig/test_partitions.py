"""Partition tables (fleetwire.host.rig.partitions): the CSV ESP-IDF's gen_esp32part.py reads,
and the binary the bootloader reads at 0x8000."""

import os

import pytest

from fleetwire.host.rig import partitions as pt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_fleetwires_table_reads_as_the_bootloader_will_see_it():
    parts = pt.load(os.path.join(ROOT, "firmware", "partitions-mqtt.csv"))
    assert [(p.label, p.type, p.subtype, p.offset, p.size) for p in parts] == [
        ("nvs", 1, 0x02, 0x9000, 0x6000),
        ("phy_init", 1, 0x01, 0xF000, 0x1000),
        ("factory", 0, 0x00, 0x10000, 0x1F0000),
        ("mqtt", 1, 0x99, 0x200000, 0x40000),
        ("vfs", 1, 0x81, 0x240000, 0x1C0000),
    ]
    binary = pt.to_binary(parts)
    assert len(binary) == 0xC00 and binary[:2] == b"\xaa\x50" and binary[5 * 32 : 5 * 32 + 2] == b"\xeb\xeb"
    assert pt.from_binary(binary) == parts


def test_blank_offsets_sizes_and_flags_as_gen_esp32part_places_them():
    parts = pt.parse_csv(
        "nvs, data, nvs, , 24K\nphy_init, data, phy, , 4K\n"
        "factory, app, factory, , 1M\nstore, data, 0x99, , 64K, encrypted\n"
    )
    assert [(p.label, p.offset, p.size) for p in parts] == [
        ("nvs", 0x9000, 0x6000),
        ("phy_init", 0xF000, 0x1000),
        ("factory", 0x10000, 0x100000),
        ("store", 0x110000, 0x10000),
    ]
    assert parts[-1].encrypted and pt.from_binary(pt.to_binary(parts))[-1].encrypted


@pytest.mark.parametrize(
    "csv,why",
    [
        ("a, data, nvs, 0x9000, 0x2000\nb, data, nvs, 0xa000, 0x1000\n", "a .0x9000-0xb000. overlaps b"),
        ("a, app, factory, 0x11000, 1M\n", "not on a 0x10000 boundary"),
        ("a, data, nvs, 0x9000, 0x1000, secret\n", "unknown flag 'secret'"),
        ("otadata, data, ota, 0x9000, 0x1000\n", "otadata is 0x1000 bytes: it needs two 4 KB sectors"),
        ("a_name_of_sixteen, data, nvs, 0x9000, 0x1000\n", "longer than 15 bytes"),
        ("a, data, nvs, 0x9000, lots\n", "size 'lots' is not a number"),
    ],
)
def test_tables_a_bootloader_would_refuse_are_refused_with_the_reason(csv, why):
    with pytest.raises(pt.PartitionTableError, match=why):
        pt.parse_csv(csv)


def test_a_binary_table_with_a_wrong_md5_is_refused():
    b = bytearray(pt.to_binary(pt.parse_csv("a, data, nvs, 0x9000, 0x1000\n")))
    b[8] ^= 1  # the entry's size changed, not its MD5
    with pytest.raises(pt.PartitionTableError, match="MD5 does not match"):
        pt.from_binary(bytes(b))
    with pytest.raises(pt.PartitionTableError, match="no partition table"):
        pt.from_binary(b"\xff" * 0xC00)
