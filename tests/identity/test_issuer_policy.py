"""The issuer's policy (fleetwire.host.identity.issuer, what `fleetwire ca serve` applies to
each request that came on fleet/<id>/cert_req): the same device id, the same key, this CA,
a bounded validity; anything else is refused with a reason a person can act on."""

import datetime

import pytest

from fleetwire.host.identity import pki
from fleetwire.host.identity.issuer import Refused, renew, report


@pytest.fixture
def ca(tmp_path):
    return pki.FleetCA.create(str(tmp_path / "ca"))


def test_a_renewal_certifies_the_same_key_and_name_anew_within_the_validity_bound(ca):
    old = ca.issue("pol-1", days=5)
    new = renew(ca, "pol-1", pki.der(old.cert), days=90)
    assert pki.common_name(new) == "pol-1" and pki.signed_by(new, ca.cert)
    assert new.public_key().public_numbers() == old.key.public_key().public_numbers()
    assert new.serial_number != old.cert.serial_number
    left = pki.not_after(new) - datetime.datetime.now(datetime.timezone.utc)
    assert datetime.timedelta(days=89) < left <= datetime.timedelta(days=90)
    assert ca.lookup(new)["role"] == "device" and not ca.revoked(old.cert)  # revoked once switched
    with pytest.raises(Refused, match="valid 1 to 730 days"):
        renew(ca, "pol-1", pki.der(old.cert), days=pki.LEAF_DAYS + 1)


def test_a_request_carrying_another_boards_certificate_is_refused(ca):
    other = ca.issue("pol-other")
    with pytest.raises(Refused, match="carries the certificate of 'pol-other': a board renews only its own"):
        renew(ca, "pol-2", pki.der(other.cert))


def test_a_certificate_of_another_ca_is_refused(ca, tmp_path):
    foreign = pki.FleetCA.create(str(tmp_path / "foreign"), ca.name).issue("pol-3")
    with pytest.raises(Refused, match="was not issued by this CA"):
        renew(ca, "pol-3", pki.der(foreign.cert))


def test_a_revoked_or_expired_or_unknown_certificate_is_refused(ca):
    revoked = ca.issue("pol-4")
    ca.revoke(serial=pki.serial_hex(revoked.cert))
    with pytest.raises(Refused, match="was revoked on .*--rotate"):
        renew(ca, "pol-4", pki.der(revoked.cert))
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=3)
    expired = ca.issue("pol-5", not_before=start, days=1)
    with pytest.raises(Refused, match="has expired"):
        renew(ca, "pol-5", pki.der(expired.cert))
    unknown = ca.issue("pol-6", record=False)
    with pytest.raises(Refused, match="is not in this CA's index"):
        renew(ca, "pol-6", pki.der(unknown.cert))


def test_a_service_name_or_a_request_that_is_no_certificate_is_refused(ca):
    op = ca.issue("operator", role="operator")
    with pytest.raises(Refused, match="operator identity, not a board's"):
        renew(ca, "operator", pki.der(op.cert))
    with pytest.raises(Refused, match="is not a DER certificate"):
        renew(ca, "pol-7", b"\x30\x03hi!")


def test_a_switch_revokes_the_old_certificate_and_a_failed_try_the_new_one(ca):
    old = ca.issue("pol-8")
    new = renew(ca, "pol-8", pki.der(old.cert))
    # the board writes serials as their bytes in hex: a leading 0 is the same number
    said = "ok 0%s 0%s" % (pki.serial_hex(new), pki.serial_hex(old.cert))
    assert [e["serial"] for e in report(ca, "pol-8", said)] == [pki.serial_hex(old.cert)]
    assert ca.revoked(old.cert) and not ca.revoked(new)
    assert report(ca, "pol-8", said) == []  # told again after a power cut: nothing more to do
    newer = renew(ca, "pol-8", pki.der(new))
    report(ca, "pol-8", "bad %s the test connection failed" % pki.serial_hex(newer))
    assert ca.revoked(newer) and not ca.revoked(new)


def test_a_report_about_another_boards_certificate_is_refused(ca):
    mine, theirs = ca.issue("pol-9"), ca.issue("pol-10")
    with pytest.raises(Refused, match="never issued to it"):
        report(ca, "pol-9", "ok %s %s" % (pki.serial_hex(mine.cert), pki.serial_hex(theirs.cert)))
    with pytest.raises(Refused, match="is not 'ok NEW OLD' or 'bad NEW REASON'"):
        report(ca, "pol-9", "switched")
    assert not ca.revoked(theirs.cert) and not ca.revoked(mine.cert)


def test_two_issuers_on_one_ca_directory_keep_every_record(ca):
    # two `ca serve` (or `ca issue` beside one) renew and issue at the same time: each index
    # change is a read-change-write, and none may write over the other's record
    import subprocess
    import sys

    board = ca.issue("twin-board")
    prog = (
        "import sys\n"
        "from fleetwire.host.identity import pki\n"
        "from fleetwire.host.identity.issuer import renew\n"
        "ca = pki.FleetCA(sys.argv[1])\n"
        "old = pki.load_certificate(sys.argv[2])\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "for i in range(15):\n"
        "    print(pki.serial_hex(renew(ca, 'twin-board', pki.der(old))), flush=True)\n"
    )
    pem = ca.dir + "/twin-board.pem"
    pki.write_public(pem, pki.pem(board.cert))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", prog, ca.dir, pem],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    assert [p.stdout.readline() for p in procs] == ["ready\n"] * 3
    for p in procs:  # all three at once
        p.stdin.write("go\n")
        p.stdin.flush()
    issued = [s for p in procs for s in p.communicate(timeout=120)[0].split()]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert len(issued) == 45
    assert set(issued) <= {e["serial"] for e in ca.index()}
