"""End-to-end tests of the reports that `faultline run` writes (junit.xml, report.html,
summary.md), of `faultline report DIR` and of `faultline compare`. Two real short runs of
scenarios/link_down_rail0.yaml (a link_down that ftccl survives) feed every test. junit.xml is
parsed with xml.etree and checked against the JUnit schema's elements and attributes;
report.html is rendered in headless Chromium: the verdict is read from the rendered DOM, the
fault bands of the busbw plot are counted there, and Chromium's network log must show no
request made by the page."""
import glob
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from page_check import check_page, run_chromium
from test_run import FAULTLINE, Env, namespaces_possible, scenario  # noqa: F401 (fixture)

# What the JUnit XML schema read by CI systems (Jenkins junit-10.xsd, the Ant junit.xsd)
# allows: element -> (attributes, children).
JUNIT_ALLOWED = {
    "testsuites": ({"name", "time", "tests", "failures", "disabled", "errors"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors", "time", "disabled", "skipped",
                   "timestamp", "hostname", "id", "package"},
                  {"properties", "testcase", "system-out", "system-err"}),
    "properties": (set(), {"property"}),
    "property": ({"name", "value"}, set()),
    "testcase": ({"name", "assertions", "time", "classname", "status"},
                 {"skipped", "error", "failure", "system-out", "system-err"}),
    "failure": ({"message", "type"}, set()),
    "error": ({"message", "type"}, set()),
    "skipped": ({"message"}, set()),
    "system-out": (set(), set()),
    "system-err": (set(), set()),
}
REQUIRED_ATTRS = {"testsuite": {"name", "tests"}, "testcase": {"name", "classname"},
                  "property": {"name", "value"}}


def page_requests(netlog_path):
    """URLs the page asked for, from Chromium's --log-net-log: requests with an initiator
    (the browser's own background requests have the initiator "not an origin")."""
    with open(netlog_path) as f:
        log = json.load(f)
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for e in log["events"]:
        p = e.get("params") or {}
        if e["type"] == start_job and "url" in p and p.get("initiator") != "not an origin":
            urls.append(p["url"])
    return urls


class Dom(HTMLParser):
    """The rendered DOM as a flat list of (tag, attrs, ancestors' ids) plus the verdict text."""

    def __init__(self):
        super().__init__()
        self.stack = []
        self.elements = []
        self.text = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        ids = [x[1].get("id") for x in self.stack if x[1].get("id")]
        self.elements.append((tag, a, ids))
        if tag not in ("meta", "br", "input", "img", "link"):
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), [x[1].get("id") for x in self.stack if x[1].get("id")]))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        for _, a in self.stack:
            if a.get("id"):
                self.text[a["id"]] = self.text.get(a["id"], "") + data

    def count(self, tag, cls, inside):
        return sum(1 for t, a, ids in self.elements if t == tag and a.get("class") == cls and inside in ids)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, namespaces_possible):  # noqa: F811
    """Two runs of the same scenario: (Env, completed process) each."""
    out = []
    try:
        for name in ("a", "b"):
            e = Env(tmp_path_factory.mktemp(name))
            out.append((e, None))
            out[-1] = (e, e.run(scenario("link_down_rail0.yaml")))
        yield out
    finally:
        for e, _ in out:
            e.safety_cleanup()


def test_run_writes_all_three_reports(runs):
    for e, p in runs:
        assert p.returncode == 0, p.stdout + p.stderr
        for f in ("junit.xml", "report.html", "summary.md"):
            assert os.path.getsize(os.path.join(e.out, f)) > 0, f
        r = e.report()
        assert r["files"]["junit"] == "junit.xml"
        assert r["files"]["html"] == "report.html"
        md = open(os.path.join(e.out, "summary.md")).read()
        assert md.startswith(f"## faultline: {r['scenario']['name']} — **PASS**")
        assert "| down | link_down | host 1 rail 0 (host) |" in md


def check_junit_schema(node):
    attrs, children = JUNIT_ALLOWED[node.tag]
    assert set(node.attrib) <= attrs, f"<{node.tag}> has attributes {set(node.attrib) - attrs}"
    assert REQUIRED_ATTRS.get(node.tag, set()) <= set(node.attrib), f"<{node.tag}> lacks attributes"
    for c in node:
        assert c.tag in children, f"<{c.tag}> inside <{node.tag}>"
        check_junit_schema(c)
    for k in ("tests", "failures", "errors", "skipped"):
        if k in node.attrib:
            assert node.attrib[k].isdigit(), f"{node.tag}@{k}={node.attrib[k]}"


def test_junit_is_valid_and_matches_the_report(runs):
    e, _ = runs[0]
    r = e.report()
    root = ET.parse(os.path.join(e.out, "junit.xml")).getroot()
    check_junit_schema(root)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    assert suite.get("name") == r["scenario"]["name"]
    # schema order: properties, testcases, system-out
    tags = [c.tag for c in suite]
    assert tags[0] == "properties" and tags[-1] == "system-out"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["outcome"] + ["expect." + x["name"] for x in r["expectations"]]
    failures = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("tests")) == len(cases) == int(root.get("tests"))
    assert int(suite.get("failures")) == len(failures) == int(root.get("failures"))
    assert int(suite.get("errors")) == 0
    for case, expectation in zip(cases[1:], r["expectations"]):
        assert (case.find("failure") is None) == expectation["pass"]
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["ccl"] == "ftccl" and props["outcome"] == r["outcome"] == "survived"
    assert props["scenario.sha256"] == r["scenario"]["sha256"]


def test_html_renders_offline_in_chromium(runs, tmp_path):
    e, _ = runs[0]
    r = e.report()
    url = "file://" + os.path.join(e.out, "report.html")
    netlog = str(tmp_path / "netlog.json")
    p = run_chromium(url, "--dump-dom", f"--log-net-log={netlog}")
    assert p.returncode == 0, p.stderr[-2000:]
    dom = Dom()
    dom.feed(p.stdout)
    assert dom.text.get("verdict", "").strip().startswith("PASS"), dom.text.get("verdict")
    assert f"PASS: {r['scenario']['name']} on ftccl survived" in dom.text["verdict"]
    applied = [f for f in r["faults"] if f["applied_s"] is not None]
    assert len(applied) == 1
    assert dom.count("rect", "fault-band", "busbw-plot") == len(applied)
    assert dom.count("polyline", "busbw", "busbw-plot") == 1
    # The measured instants of the fault are marked exactly where the metric is not null.
    pf = r["per_fault"][0]
    for key, cls in (("detection_ms", "marker marker-detection"),
                     ("failover_latency_ms", "marker marker-failover"),
                     ("recovery_ms", "marker marker-recovery")):
        assert dom.count("line", cls, "busbw-plot") == (0 if pf[key] is None else 1), key
    # Per-rail throughput from the sampled counters: a plot per host, each port's tx and rx
    # (a line breaks where a sample had no rate), the applied fault shaded.
    assert r["files"]["rails"] == "rails.csv"
    assert "per-rail-note" not in dom.text
    for h in (0, 1):
        assert dom.count("polyline", "rail-rate", f"rail-throughput-h{h}") >= 4, h
        assert dom.count("rect", "fault-band", f"rail-throughput-h{h}") == len(applied), h
    assert dom.count("g", "rail-lane", "rail-plot") == 2
    assert "name: py-link-down-rail0" in dom.text["scenario"]
    assert r["environment"]["kernel"] in dom.text["environment"]
    # No request made by the page: nothing but the file itself was loaded.
    assert page_requests(netlog) == []
    # The check above sees a page's requests: a page with an external image and stylesheet.
    bad = tmp_path / "external.html"
    bad.write_text('<img src="http://198.51.100.7/x.png"><link rel=stylesheet href="https://example.invalid/a.css">')
    control = str(tmp_path / "control.json")
    run_chromium("file://" + str(bad), "--dump-dom", f"--log-net-log={control}")
    assert sorted(page_requests(control)) == ["http://198.51.100.7/x.png", "https://example.invalid/a.css"]
    # At 1400 px nothing runs past the page's column (the per-fault table once ran 380 px off
    # its right edge) and no raw Markdown shows; the page is drawn.
    check_page(os.path.join(e.out, "report.html"), tmp_path)
    # A screenshot of the page is drawn.
    shot = str(tmp_path / "report.png")
    p = run_chromium(url, f"--screenshot={shot}", "--window-size=1100,2400")
    assert p.returncode == 0 and os.path.getsize(shot) > 20000


def test_report_rerenders_the_same_files(runs, tmp_path):
    e, _ = runs[0]
    copy = str(tmp_path / "copy")
    shutil.copytree(e.out, copy)
    originals = {f: open(os.path.join(copy, f)).read() for f in ("junit.xml", "report.html", "summary.md")}
    for f in originals:
        os.remove(os.path.join(copy, f))
    p = e.faultline("report", copy)
    assert p.returncode == 0, p.stderr
    for f, text in originals.items():
        assert open(os.path.join(copy, f)).read() == text, f
    assert e.faultline("report", str(tmp_path / "nothing")).returncode == 2


def scaled(src, dst, factor):
    """A copy of run directory src whose stall_ms (overall and per fault) is multiplied."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "report.json")
    r = json.load(open(path))
    r["metrics"]["stall_ms"] *= factor
    for pf in r["per_fault"]:
        if pf["stall_ms"] is not None:
            pf["stall_ms"] *= factor
    json.dump(r, open(path, "w"))
    return r


def test_compare_exit_codes(runs, tmp_path):
    (a, _), (b, _) = runs
    same = a.faultline("compare", a.out, a.out)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "compare: 0 regression(s)" in same.stdout

    # Two real runs: the exit code agrees with the regressions listed.
    real = a.faultline("compare", a.out, b.out, "--tolerance", "25%")
    assert real.returncode in (0, 1), real.stderr
    listed = sum(1 for line in real.stdout.splitlines() if "REGRESSION" in line or "LOST" in line)
    assert (real.returncode == 1) == (listed > 0), real.stdout

    # B's stall three times A's: a regression beyond 10% (higher is worse); not the other way.
    worse = str(tmp_path / "worse")
    r = scaled(a.out, worse, 3.0)
    assert r["metrics"]["stall_ms"] > 0, "the fault caused no stall to scale"
    p = a.faultline("compare", a.out, worse, "--tolerance", "10%")
    assert p.returncode == 1, p.stdout
    stall = [l for l in p.stdout.splitlines() if l.strip().startswith("stall_ms")]
    assert stall and "REGRESSION (higher is worse)" in stall[0] and "+200.0%" in stall[0], p.stdout
    back = a.faultline("compare", worse, a.out)
    assert back.returncode == 0, back.stdout
    assert "improved" in [l for l in back.stdout.splitlines() if l.strip().startswith("stall_ms")][0]
    # Within a 250% tolerance the tripled stall is no regression.
    assert a.faultline("compare", a.out, worse, "--tolerance", "250%").returncode == 0

    # Bad input: one directory, a bad tolerance, a directory without report.json.
    assert a.faultline("compare", a.out).returncode == 2
    assert a.faultline("compare", a.out, b.out, "--tolerance", "lots").returncode == 2
    assert a.faultline("compare", a.out, str(tmp_path / "none")).returncode == 2


def test_compare_stats_over_repeated_runs(runs, tmp_path):
    (a, _), (b, _) = runs
    folder = tmp_path / "repeats"
    folder.mkdir()
    shutil.copytree(a.out, folder / "1")
    shutil.copytree(b.out, folder / "2")
    p = a.faultline("compare", "--stats", str(folder))
    assert p.returncode == 0, p.stderr
    assert "py-link-down-rail0 [ftccl]  (2 run(s))" in p.stdout
    assert "verdicts: PASS 2" in p.stdout
    stall = [l.split() for l in p.stdout.splitlines() if l.strip().startswith("stall_ms")][0]
    values = sorted(x.report()["metrics"]["stall_ms"] for x in (a, b))
    assert stall[1:4] == ["2", "0", "0"]  # n, never, n/a
    # nearest-rank p50 of two values is the smaller, p95 the larger.
    assert float(stall[4]) == pytest.approx(values[0], abs=1e-3)
    assert float(stall[5]) == pytest.approx(values[1], abs=1e-3)


def as_schema(src, dst, schema):
    """A copy of run directory src whose report.json claims `schema`."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "report.json")
    r = json.load(open(path))
    r["schema"] = schema
    json.dump(r, open(path, "w"))


def test_compare_refuses_v1_against_v2_report_renders_v1(runs, tmp_path):
    (a, _), _ = runs
    assert a.report()["schema"] == "faultline.report/v2"
    v1 = str(tmp_path / "v1")
    as_schema(a.out, v1, "faultline.report/v1")
    for args in ((a.out, v1), (v1, a.out)):
        p = a.faultline("compare", *args)
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stdout == ""
        assert "faultline.report/v1" in p.stderr and "faultline.report/v2" in p.stderr, p.stderr
        assert "full convergence" in p.stderr and "first-path" in p.stderr, p.stderr
    # --stats over a folder holding both is refused too; over v1 alone it is fine.
    both = tmp_path / "both"
    both.mkdir()
    shutil.copytree(a.out, both / "2")
    shutil.copytree(v1, both / "1")
    assert a.faultline("compare", "--stats", str(both)).returncode == 2
    assert a.faultline("compare", v1, v1).returncode == 0
    # A v1 run directory still renders: the layout keys are the same.
    for f in ("junit.xml", "report.html", "summary.md"):
        os.remove(os.path.join(v1, f))
    p = a.faultline("report", v1)
    assert p.returncode == 0, p.stderr
    for f in ("junit.xml", "report.html", "summary.md"):
        assert os.path.getsize(os.path.join(v1, f)) > 0, f
    # An unknown schema is bad input, named.
    v0 = str(tmp_path / "v0")
    as_schema(a.out, v0, "faultline.report/v0")
    p = a.faultline("report", v0)
    assert p.returncode == 2 and "faultline.report/v0" in p.stderr, p.stderr
