"""report.html as a person sees it, in headless Chromium (tests/analytics/headless.py): on a laptop
(1366 px) every table fits the page; on a phone (390 px) the page is laid out at the phone's width
and never scrolls sideways, a table wider than the screen scrolling inside its own box. A release
column that no record gave a figure for (publish latency, in compressed time) is not shown."""

import json

import pytest

import headless
from conftest import table


@pytest.fixture(scope="module")
def browser():
    try:
        exe = headless.find()
    except headless.Missing as e:  # the suite's set-up installs it: a failure, not a skip
        pytest.fail(str(e))
    with headless.Chromium(exe) as b:
        yield b


def test_on_a_laptop_every_table_fits_the_page(report_dir, browser):
    out, _ = report_dir
    seen = headless.layout(browser, out / "report.html", headless.LAPTOP)
    assert seen["page"] <= seen["viewport"], seen  # the page does not scroll sideways
    assert {"Releases", "Worst devices"} <= {t["section"] for t in seen["tables"]}, seen
    for t in seen["tables"]:
        # the whole table in sight: no wider than the box it is in, the box within the page
        assert t["width"] <= t["box_right"] - t["box_left"], t
        assert 0 <= t["box_left"] and t["box_right"] <= seen["viewport"], t


def test_on_a_phone_the_page_never_scrolls_sideways_and_a_wide_table_scrolls_in_its_box(report_dir, browser):
    out, _ = report_dir
    seen = headless.layout(browser, out / "report.html", headless.PHONE)
    assert seen["viewport"] == headless.PHONE["width"], seen  # not a desktop page shrunk (980 px)
    assert seen["page"] <= seen["viewport"], seen
    wide = [t for t in seen["tables"] if t["width"] > t["box_right"] - t["box_left"]]
    assert wide, seen  # the releases table is wider than a phone: what this test is about
    for t in seen["tables"]:
        assert 0 <= t["box_left"] and t["box_right"] <= seen["viewport"], t
    assert all(t["scrolls"] for t in wide), wide


def render_without_latency(out):
    """report.html from the run's own tables, as a time-compressed simulation makes them: no
    record with a publish latency, so none in the releases table."""
    from fleetwire.host.analytics import report

    tables = ("firmware_cohort", "outliers", "device_health", "crash_signatures", "crash_releases")
    d = {n: table(out, n) for n in tables}
    d["firmware_cohort"][["latency_p50", "latency_p95"]] = None
    pngs = {k: "plots/%s.png" % k for k in ("crash_free", "coverage_loss", "rssi", "worst_devices")}
    quality = json.loads((out / "quality.json").read_text())
    return report.render(d, pngs, {"firmware_cohort": "csv/firmware_cohort.csv"}, quality)


def test_a_release_column_without_a_figure_is_left_out_and_the_page_says_why(report_dir):
    out, _ = report_dir
    measured = (out / "report.html").read_text()
    assert "<th title='latency_p50'>latency p50 ms</th>" in measured
    assert "Publish latency is left out" not in measured
    page = render_without_latency(out)
    assert "latency_p50" not in page and "latency_p95" not in page
    assert "Publish latency is left out: no record carries one." in page
    assert "<th title='crash_free_hours_pct'>crash-free hours %</th>" in page  # the rest stays


def test_headings_are_labels_with_each_columns_name_as_its_tooltip(report_dir):
    out, _ = report_dir
    page = (out / "report.html").read_text()
    for name, label in (
        ("fw_version", "release"),
        ("crash_free_hours_pct_delta", "crash-free hours % vs previous"),
        ("heap_leak_bytes_per_hour", "heap leak B/h"),
        ("unexpected_resets", "unexpected resets"),
    ):
        assert "<th title='%s'>%s</th>" % (name, label) in page, name
