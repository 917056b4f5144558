"""The update topics inside the fleet identity ACL (`fleetwire broker-config`, real mosquitto,
paho clients with certificates from the fleet CA): a board asks for chunks on
fleet/<id>/ota_get, which the operator's update service reads; it reads its own offers and
chunks and no other board's; no board can ask in another's name."""


def test_a_board_asks_for_its_own_chunks_and_sees_no_other_boards_update(identity_mosquitto, make_observer):
    service = make_observer(identity_mosquitto)  # the operator
    service.subscribe("fleet/+/ota_get", 0)
    board = make_observer(identity_mosquitto, identity=("ota-acl-1", "device"))
    board.subscribe("fleet/ota-acl-1/ota/#", 1)
    other = make_observer(identity_mosquitto, identity=("ota-acl-2", "device"))
    other.subscribe("fleet/ota-acl-1/ota/#", 1)  # granted, but nothing may be delivered
    other.publish("fleet/ota-acl-1/ota_get", b"posing-as-ota-acl-1", qos=1)
    board.publish("fleet/ota-acl-1/ota_get", b"request", qos=0)
    got = service.wait_until(lambda m: any(x[1] == b"request" for x in m))
    assert [x[1] for x in got] == [b"request"]
    service.publish("fleet/ota-acl-1/ota/offer", b"manifest", qos=1, retain=True)
    service.publish("fleet/ota-acl-1/ota/chunk", b"chunk", qos=1)
    got = board.wait_until(lambda m: len(m) >= 2)
    assert [x[1] for x in got] == [b"manifest", b"chunk"]
    service.publish("fleet/ota-acl-1/ota/offer", b"", qos=1, retain=True)  # no retained offer left behind
    board.wait_until(lambda m: len(m) >= 3)
    assert other.messages == []
