"""fleetwire statements: the MQTT 3.1.1 and MQTT 5.0 client statements and the tests that prove
them."""

import argparse
import os
import re

from fleetwire.tools import statements

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_test_name_gives_the_statement_ids_it_proves():
    ids = statements.ids_in_name
    assert ids("test_MQTT_3_1_0_1_connect_is_first") == ["3.1.0-1"]
    assert ids("test_MQTT_3_1_2_13_and_15_without_a_will") == ["3.1.2-13", "3.1.2-15"]
    assert ids("test_MQTT_3_1_3_4_and_10_and_11_utf8") == ["3.1.3-4", "3.1.3-10", "3.1.3-11"]
    assert ids("test_MQTT_3_1_2_4_and_4_1_0_1_and_2_kept") == ["3.1.2-4", "4.1.0-1", "4.1.0-2"]
    assert ids("test_MQTT_3_1_2_23_pings_and_a_dead_link") == ["3.1.2-23"]  # "and" in the words
    assert ids("test_MQTT5_4_7_3_3_a_topic_over_65535_bytes") == ["4.7.3-3"]
    assert ids("test_MQTT5_3_1_2_16_and_18_no_fields") == ["3.1.2-16", "3.1.2-18"]


def test_every_client_statement_has_a_test_or_does_not_apply():
    tested, na, untested = statements.summary(statements.coverage(REPO))
    assert untested == []
    assert sorted(na) == sorted(statements.NOT_APPLICABLE)


def test_the_contributors_page_states_the_count_the_tool_gives():
    tested, na, untested = statements.summary(statements.coverage(REPO))
    with open(os.path.join(REPO, "docs", "contributing.md"), encoding="utf-8") as f:
        page = f.read()
    m = re.search(r"\*\*(\d+) of the (\d+) have a test; the other (\d+) do not\s+apply\*\*", page)
    assert m, "docs/contributing.md no longer states the statement count"
    assert (int(m.group(1)), int(m.group(2)), int(m.group(3))) == (
        len(tested),
        len(statements.STATEMENTS),
        len(na),
    )


def test_the_mqtt5_statements_are_the_133_that_bind_a_client():
    assert len(statements.STATEMENTS5) == 133
    assert set(statements.NOT_APPLICABLE5) <= set(statements.STATEMENTS5)
    assert "3.2.2-16" not in statements.STATEMENTS5  # the server assigns a client id
    assert statements.STATEMENTS5["3.1.2-11"] != statements.STATEMENTS["3.1.2-11"]  # renumbered


def test_mqtt5_coverage_counts_its_own_tests_and_vectors_not_311s():
    found = statements.coverage(REPO, "5")
    assert any("mqtt5.jsonl" in p for p in found["3.3.2-8"])  # a vector cites it
    assert any(
        p.endswith("::test_MQTT5_4_7_3_3_a_topic_name_or_filter_over_65535_bytes_is_refused")
        for p in found["4.7.3-3"]
    )
    assert not any("codec.jsonl" in p for ps in found.values() for p in ps)
    tested, na, untested = statements.summary(found, "5")
    # the codec's statements have a test; the session's (flow control, aliases, expiry) are to come
    for i in ("1.5.4-1", "1.5.5-1", "1.5.7-1", "2.1.3-1", "3.3.2-8", "3.3.4-6", "3.14.2-1", "3.15.2-1"):
        assert i in tested
    assert len(tested) >= 55 and len(tested) + len(na) + len(untested) == 133


def test_the_report_prints_both_standards_and_fails_only_for_311(capsys):
    args = argparse.Namespace(repo=REPO, missing=True, mqtt=None)
    assert statements.run(args) == 0
    out = capsys.readouterr().out
    assert "== MQTT 3.1.1" in out and "== MQTT 5.0" in out
    assert re.search(r"MQTT 5\.0: \d+ of the 133 client statements have a test", out)
