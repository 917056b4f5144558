"""How a simulated fleet fits the machine (fleetwire.host.fleet.plan, `fleetwire demo`): workers
one per 1,500 devices and at most one a core, time compressed no more than the machine keeps up
with, and the choice said in words."""

from fleetwire.host.fleet import plan


def test_a_small_fleet_keeps_the_compression_asked_in_one_process():
    c = plan.choose(200, 60, 120, cores=2)
    assert (c.workers, c.speed) == (1, 120)
    assert c.words(4)[
        1
    ] == "time compressed 120x: 400 records/s, within the 800 this machine keeps up with; " + (
        "4 simulated hours take 2 min"
    )


def test_ten_thousand_devices_take_every_core_and_less_compression_and_say_so():
    c = plan.choose(10000, 60, 120, cores=2)
    assert c.workers == 2 and c.speed == 4.8 and c.rate() == 800
    said = c.words(4)
    assert said[0].startswith("10000 devices in 2 simulator processes, up to 5000 each")
    assert said[1].startswith(
        "time compressed 4.8x, not the 120x asked: at that 10000 devices reporting every 60 s"
    )
    assert said[1].endswith("4 simulated hours take 50 min")


def test_workers_asked_for_are_kept():
    assert plan.choose(40, 60, 720, workers=2, cores=2).workers == 2
    assert plan.choose(4000, 60, 1, cores=8).workers == 3
