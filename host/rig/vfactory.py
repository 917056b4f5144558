"""What a new virtual board's flash holds when it leaves the factory, as a board that
came with MicroPython on it: a bootloader at 0x1000, a partition table at 0x8000 and
the stock app in the first app partition. The table is MicroPython's (nvs, phy_init,
then factory; or with `ota`: nvs, otadata, phy_init, ota_0, ota_1) with app slots of
APP_SLOT bytes, then the data partitions asked for (the store's `mqtt`, ...)."""

from fleetwire.host.rig import espimage, partitions as pt

APP_SLOT = 0x80000  # 512 KB per app partition: room for a firmware with frozen modules
DATA_SUBTYPE = 0x99  # fleetwire's data partitions (firmware/partitions-mqtt.csv)


def layout(data=None, ota=False, app_size=APP_SLOT):
    """data: {label: blocks of 4 KB, or {"blocks": n, "encrypted": True}} -> [Partition]."""
    P, D, A = pt.Partition, pt.TYPE_DATA, pt.TYPE_APP
    if ota:
        parts = [
            P("nvs", D, 0x02, 0x9000, 0x4000),
            P("otadata", D, 0x00, 0xD000, 0x2000),
            P("phy_init", D, 0x01, 0xF000, 0x1000),
            P("ota_0", A, 0x10, 0x10000, app_size),
            P("ota_1", A, 0x11, 0x10000 + app_size, app_size),
        ]
    else:
        parts = [
            P("nvs", D, 0x02, 0x9000, 0x6000),
            P("phy_init", D, 0x01, 0xF000, 0x1000),
            P("factory", A, 0x00, 0x10000, app_size),
        ]
    offset = parts[-1].end
    for label, blocks in (data if data is not None else {"mqtt": 64}).items():
        flags = 0
        if isinstance(blocks, dict):
            flags = 1 if blocks.get("encrypted") else 0
            blocks = blocks["blocks"]
        parts.append(P(label, D, DATA_SUBTYPE, offset, blocks * pt.SECTOR, flags))
        offset += blocks * pt.SECTOR
    pt.check(parts)
    return parts


def program(flash, parts, app=None):
    """Write bootloader, table and app (default: the stock one) into an erased flash."""
    flash.write(0x1000, espimage.bootloader_image())
    flash.write(pt.TABLE_OFFSET, pt.to_binary(parts))
    first = next(p for p in parts if p.type == pt.TYPE_APP)
    flash.write(first.offset, app or espimage.app_image(espimage.STOCK_VERSION, "micropython"))
