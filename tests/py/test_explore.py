"""End-to-end tests of `faultline explore`: a short real campaign over the link fault space
(real namespaces, ranks and faults), its files, the replay of a generated run with
`faultline run`, and bad input. Each test has its own journal and output directory and checks
with iproute2 that no namespace of its runs is left."""
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest
from page_check import check_page

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")
LINKS = os.path.join(ROOT, "scenarios", "explore", "links.yaml")
FLAPS = os.path.join(ROOT, "scenarios", "explore", "flaps.yaml")
INVARIANTS = ["exact_results", "no_silent_hang", "liveness_after_heal", "lossless", "ccl_sequence",
              "nothing_left_behind"]


def faultline(env, *args, timeout=900):
    return subprocess.run([FAULTLINE, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def netns_names():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line}


def timeline(report):
    """The fault timeline a report records: what was scheduled where, in order."""
    return [(f["id"], f["type"], json.dumps(f["target"], sort_keys=True), f["scheduled_s"])
            for f in report["faults"]]


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, FAULTLINE_JOURNAL_DIR=str(tmp_path / "journal"))
    e.pop("FAULTLINE_ALLOW", None)
    yield e
    # Whatever happened, nothing journaled by this test stays.
    if os.path.isdir(e["FAULTLINE_JOURNAL_DIR"]):
        subprocess.run([FAULTLINE, "cleanup"], env=e, capture_output=True, timeout=120)


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline explore needs root (namespaces)")
@pytest.mark.slow  # a campaign of real runs (and re-runs when one violates): make check
# Serial: liveness after heal compares throughput with its baseline, which another test's
# ranks on these cores would lower in part of a run only.
@pytest.mark.serial
def test_short_campaign_writes_its_files_and_every_run_replays(env, tmp_path):
    out = str(tmp_path / "campaign")
    r = faultline(env, "explore", LINKS, "--runs", "3", "--seed", "11", "--out", out,
                  "--shrink-candidates", "2")
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    with open(os.path.join(out, "campaign.json")) as f:
        c = json.load(f)
    assert c["schema"] == "faultline.campaign/v1"
    assert c["seed"] == 11 and c["ccl"] == "ftccl"
    assert c["invariants"] == INVARIANTS
    assert c["exit_code"] == r.returncode
    runs = c["runs"]
    # Three runs, or fewer when one violated an invariant (the campaign stops there).
    violated = [run for run in runs if run["invariant_failures"]]
    if r.returncode == 0:
        assert len(runs) == 3 and not violated and c["shrink"] is None
        assert not os.path.exists(os.path.join(out, "minimal.yaml"))
    else:
        assert violated == [runs[-1]]
        s = c["shrink"]
        assert s["invariant"] == violated[0]["invariant_failures"][0]
        assert s["from_index"] == violated[0]["index"]
        with open(os.path.join(out, "minimal.yaml")) as f:
            minimal = f.read()
        assert "# reproduce:" in minimal and "invariant: " + s["invariant"] in minimal
        v = faultline(env, "validate", os.path.join(out, "minimal.yaml"), timeout=60)
        assert v.returncode == 0, v.stdout + v.stderr
    run_ids = []
    for i, run in enumerate(runs):
        assert run["index"] == i and run["seed"] == 11
        assert run["error"] is None
        assert run["outcome"] in ("survived", "aborted_clean", "hung", "crashed")
        assert [x["name"] for x in run["invariants"]] == INVARIANTS
        with open(run["file"]) as f:
            text = f.read()
        assert f"# seed 11, index {i}:" in text
        assert f"name: explore-links-s11-i{i}" in text
        v = faultline(env, "validate", run["file"], timeout=60)
        assert v.returncode == 0, v.stdout + v.stderr
        with open(os.path.join(run["dir"], "report.json")) as f:
            report = json.load(f)
        assert report["outcome"] == run["outcome"]
        assert len(report["faults"]) == len(run["faults"]) >= 1
        # ftccl's chunk counters: every chunk numbered was accepted exactly once, and the
        # cumulative acknowledgements agree, in every run whose ranks all completed.
        verdicts = {x["name"]: x["verdict"] for x in run["invariants"]}
        if run["outcome"] == "survived":
            assert verdicts["lossless"] == "pass", run["invariants"]
            assert verdicts["ccl_sequence"] == "pass", run["invariants"]
        run_ids.append(report["environment"]["run_id"])
    # junit.xml: one testcase per run and invariant.
    suite = ET.parse(os.path.join(out, "junit.xml")).getroot().find("testsuite")
    assert int(suite.get("tests")) == len(runs) * len(INVARIANTS)
    assert int(suite.get("failures")) == sum(len(run["invariant_failures"]) for run in runs)
    with open(os.path.join(out, "campaign.html")) as f:
        html = f.read()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert all(os.path.basename(run["file"]) in html for run in runs)
    # At 1400 px nothing runs past the page's column and no raw Markdown shows; it is drawn.
    check_page(os.path.join(out, "campaign.html"), tmp_path)

    # Replay: `faultline run` of a generated file schedules the same faults at the same times on
    # the same targets with the same seed.
    first = runs[0]
    replay = str(tmp_path / "replay")
    rr = faultline(env, "run", first["file"], "--out", replay, timeout=300)
    assert rr.returncode in (0, 1), rr.stdout[-3000:] + rr.stderr[-3000:]
    with open(os.path.join(first["dir"], "report.json")) as f:
        original = json.load(f)
    with open(os.path.join(replay, "report.json")) as f:
        again = json.load(f)
    assert timeline(again) == timeline(original)
    assert again["scenario"]["seed"] == original["scenario"]["seed"]
    assert again["scenario"]["sha256"] == original["scenario"]["sha256"]
    run_ids.append(again["environment"]["run_id"])

    # Nothing of any run is left: namespaces, journal entries.
    left = [n for n in netns_names() if any(n.startswith(f"fl-{rid}-") for rid in run_ids)]
    assert left == []
    jdir = env["FAULTLINE_JOURNAL_DIR"]
    assert not os.path.isdir(jdir) or [f for f in os.listdir(jdir) if f.endswith(".json")] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline explore needs root (namespaces)")
@pytest.mark.slow  # four real runs: make check
@pytest.mark.serial  # stalls and throughput are measured (see above)
def test_sweep_runs_each_value_and_plots_stall_against_it(env, tmp_path):
    out = str(tmp_path / "sweep")
    r = faultline(env, "explore", FLAPS, "--sweep", "link_flap.down=200..400:2", "--runs", "2",
                  "--seed", "3", "--out", out)
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    with open(os.path.join(out, "campaign.json")) as f:
        c = json.load(f)
    assert c["sweep"] == {"kind": "link_flap", "param": "down", "unit": "ms", "values": [200, 400]}
    assert c["shrink"] is None  # a sweep never shrinks
    runs = c["runs"]
    assert [run["sweep_value"] for run in runs] == [200, 200, 400, 400]
    assert c["exit_code"] == (1 if any(run["invariant_failures"] for run in runs) else 0)
    for run in runs:
        with open(run["file"]) as f:
            text = f.read()
        # Only the swept kind, its parameter at the run's value.
        assert "type: link_flap" in text and f"down: {int(run['sweep_value'])}ms" in text
        with open(os.path.join(run["dir"], "report.json")) as f:
            report = json.load(f)
        assert run["stall_ms"] == report["metrics"]["stall_ms"]
    # Run r of each value comes from the same (space, seed, r): the same first fault's time and
    # target, only the down time differs.
    def first(run):
        with open(run["file"]) as f:
            line = next(l for l in f if l.startswith("  - {id: f0"))
        return re.sub(r"down: \d+ms", "", line)
    assert first(runs[0]) == first(runs[2]) and first(runs[1]) == first(runs[3])
    with open(os.path.join(out, "campaign.html")) as f:
        html = f.read()
    assert "<svg" in html and "<script" not in html
    assert html.count('class="survived"') + html.count('class="aborted_clean"') + \
        html.count('class="hung"') + html.count('class="crashed"') == len(runs)
    check_page(os.path.join(out, "campaign.html"), tmp_path)


def journal_text(jdir):
    text = ""
    for root, _, files in os.walk(jdir):
        for name in files:
            if name.endswith(".json"):
                try:
                    with open(os.path.join(root, name)) as f:
                        text += f.read()
                except OSError:
                    pass
    return text


def worker_pids_under(path):
    """faultline-worker processes whose command line names `path`."""
    out = subprocess.run(["pgrep", "-af", "faultline-worker"], capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if path in line]


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline explore needs root (namespaces)")
@pytest.mark.slow  # two real runs at once: make check
def test_jobs_run_at_once_each_in_its_own_process_and_are_recorded_in_order(env, tmp_path):
    """--jobs 2: the two runs overlap in time, each is a child process whose output is its own
    log, both are judged and recorded by index, and nothing of either is left. The verdicts are
    not asserted: two runs at once on two cores is the load a parallel campaign accepts (its
    confirmation runs are one at a time); --confirm 1/1 --no-shrink keeps it to the two runs."""
    out = str(tmp_path / "campaign")
    r = faultline(env, "explore", LINKS, "--runs", "2", "--jobs", "2", "--seed", "5",
                  "--confirm", "1/1", "--no-shrink", "--out", out)
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    with open(os.path.join(out, "campaign.json")) as f:
        c = json.load(f)
    assert c["jobs"] == 2
    runs = c["runs"]
    assert [run["index"] for run in runs] == [0, 1]
    # Both started before either ended.
    a, b = runs
    assert b["started_s"] < a["started_s"] + a["seconds"], runs
    assert a["started_s"] < b["started_s"] + b["seconds"], runs
    ids = []
    for run in runs:
        assert run["error"] is None and run["outcome"] in ("survived", "aborted_clean"), run
        assert [x["name"] for x in run["invariants"]] == INVARIANTS
        with open(run["dir"] + ".log") as f:
            log = f.read()
        assert f"-> {run['dir']}" in log and "faultline run" in log, log[-2000:]
        with open(os.path.join(run["dir"], "report.json")) as f:
            report = json.load(f)
        assert report["outcome"] == run["outcome"]
        # The run judged as its own: nothing_left_behind looked for its own nft tables.
        ids.append(report["environment"]["run_id"])
        # The same file run alone by `faultline run` schedules the same faults.
        with open(run["file"]) as f:
            assert f"# seed 5, index {run['index']}:" in f.read()
    with open(os.path.join(out, "campaign.html")) as f:
        html = f.read()
    assert "up to 2 at once" in html and "Runs over time" in html
    assert "http://" not in html and "<script" not in html
    check_page(os.path.join(out, "campaign.html"), tmp_path)  # drawn: no overflow
    assert [n for n in netns_names() if any(n.startswith(f"fl-{i}-") for i in ids)] == []
    assert worker_pids_under(out) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline explore needs root (namespaces)")
@pytest.mark.slow  # two real runs: make check
def test_every_run_uses_the_worker_copied_at_the_start(env, tmp_path):
    """A campaign copies the rank program once and every run uses that copy: a build that
    replaces (or removes) the original while the campaign runs cannot change the code under
    test between runs. The original here is removed as soon as the campaign names its copy;
    both runs still run, and campaign.json records the source and the copy's sha256."""
    import hashlib
    import shutil
    src = tmp_path / "w" / "faultline-worker"
    src.parent.mkdir()
    shutil.copy2(os.path.join(BUILD, "bin", "faultline-worker"), src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "campaign"
    p = subprocess.Popen([FAULTLINE, "explore", LINKS, "--runs", "2", "--seed", "3",
                          "--confirm", "1/1", "--no-shrink", "--worker", str(src),
                          "--out", str(out)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    head = []
    for line in p.stdout:
        head.append(line)
        if "every run uses" in line:
            src.unlink()  # as a rebuild's link step does
            break
    rest, _ = p.communicate(timeout=600)
    log = "".join(head) + rest
    assert not src.exists(), log[-3000:]
    assert p.returncode in (0, 1), log[-3000:]
    copy = out / "bin" / "faultline-worker"
    assert f"every run uses {copy} (sha256 {digest}), a copy of {src}" in log, log[:2000]
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest
    with open(out / "campaign.json") as f:
        c = json.load(f)
    assert c["worker"] == {"source": str(src), "sha256": digest}
    # Every run started after the original was gone (a run that violates an invariant ends the
    # campaign at --confirm 1/1, so there may be one run: its verdict is not what is tested).
    assert [r["index"] for r in c["runs"]] in ([0], [0, 1]), c["runs"]
    for run in c["runs"]:
        assert run["error"] is None and run["outcome"] in ("survived", "aborted_clean"), run
    with open(out / "campaign.html") as f:
        assert digest in f.read()


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline explore needs root (namespaces)")
@pytest.mark.slow  # real runs: make check
def test_sigterm_with_jobs_ends_every_run_and_leaves_nothing(env, tmp_path):
    """SIGTERM to a campaign with two runs under way: both runs are told, heal their faults
    and remove their topology; the campaign records them, says it was interrupted (exit 3) and
    leaves no namespace, worker or journal entry."""
    import signal
    import time
    out = str(tmp_path / "campaign")
    p = subprocess.Popen([FAULTLINE, "explore", LINKS, "--runs", "6", "--jobs", "2", "--seed", "5",
                          "--out", out], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    # Wait until both runs have ranks, then note their run ids (from the journal's namespaces)
    # and stop the campaign.
    jdir = env["FAULTLINE_JOURNAL_DIR"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if worker_pids_under(os.path.join(out, "runs", "run-0") + "/") and \
                worker_pids_under(os.path.join(out, "runs", "run-1") + "/"):
            break
        time.sleep(0.2)
    else:
        p.kill()
        pytest.fail("the two runs never both had ranks: " + (p.communicate()[0] or "")[-3000:])
    ids = set(re.findall(r"fl-([0-9a-z]+)-(?:sw|h\d+)", journal_text(jdir)))
    assert len(ids) == 2, ids
    p.send_signal(signal.SIGTERM)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 3, text[-3000:]
    with open(os.path.join(out, "campaign.json")) as f:
        c = json.load(f)
    assert c["stop_reason"] == "interrupted", c["stop_reason"]
    assert [run["index"] for run in c["runs"]] == [0, 1]
    for run in c["runs"]:
        # Each run was told: it stopped there (faultline run's exit 3), healed and cleaned up.
        assert run["exit_code"] == 3, run
        with open(run["dir"] + ".log") as f:
            log = f.read()
        assert "interrupted; every fault healed and the topology removed" in log, log[-2000:]
    assert worker_pids_under(out) == []
    assert [n for n in netns_names() if any(n.startswith(f"fl-{i}-") for i in ids)] == []
    assert not os.path.isdir(jdir) or [f for f in os.listdir(jdir) if f.endswith(".json")] == []


def test_bad_space_is_bad_input_with_its_line(env, tmp_path):
    bad = tmp_path / "bad.yaml"
    with open(LINKS) as f:
        bad.write_text(f.read().replace("horizon: 2800ms", "horizon: 9s"))
    r = faultline(env, "explore", str(bad), "--runs", "1", "--out", str(tmp_path / "o"), timeout=60)
    assert r.returncode == 2
    assert re.search(re.escape(str(bad)) + r":\d+:10: the horizon 9000ms is past the workload's end",
                     r.stderr), r.stderr
    assert not os.path.exists(tmp_path / "o")


def test_replay_of_a_file_that_does_not_validate_is_bad_input_with_its_line(env, tmp_path):
    # Two faults on one link at once: the file is refused at its line before anything runs (it
    # was once run, failed as a harness error, and printed "every invariant holds").
    bad = tmp_path / "overlap.yaml"
    bad.write_text(
        "name: overlap\n"
        "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
        "ccl: ftccl\n"
        "workload: {op: allreduce, dtype: f32, bytes: 64KiB, duration: 4s, check: true}\n"
        "faults:\n"
        "  - {id: f0, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 2s}\n"
        "  - {id: f1, at: 2s, type: link_down, target: {host: 0, rail: 0, side: switch}, for: 1s}\n")
    r = faultline(env, "explore", LINKS, "--replay", str(bad), "--runs", "1",
                  "--out", str(tmp_path / "o"), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(re.escape(str(bad)) + r":7:\d+: fault 'f1' .* overlaps fault 'f0'", r.stderr), \
        r.stderr
    assert "every invariant holds" not in r.stdout, r.stdout
    assert not os.path.exists(tmp_path / "o")


def test_bad_options_are_bad_input(env, tmp_path):
    for args in (["--confirm", "3/2"], ["--budget", "20"], ["--confirm", "x"],
                 ["--sweep", "link_down.percent=1..2:2"], ["--sweep", "link_down.duration=9"],
                 ["--sweep", "link_down.duration=100..200:2", "--replay", LINKS],
                 ["--jobs", "0"], ["--jobs", "x"]):
        r = faultline(env, "explore", LINKS, "--out", str(tmp_path / "o"), *args, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert not os.path.exists(tmp_path / "o")
    # A space that draws frame corruption needs a ccl whose ranks serve the fault hook.
    corrupt = os.path.join(ROOT, "scenarios", "explore", "corrupt.yaml")
    r = faultline(env, "explore", corrupt, "--ccl", "gloo", "--out", str(tmp_path / "o"),
                  timeout=60)
    assert r.returncode == 2, r.stderr
    assert "draws conn_corrupt, which goes through the ranks' fault hook; ccl gloo serves none" \
        in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "o")
