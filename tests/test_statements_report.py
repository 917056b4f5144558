"""fleetwire statements: the MQTT 3.1.1 client statements and the tests that prove them."""

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
