"""conn_corrupt through `faultline run`: the runner gives every ftccl rank a fault hook, the
injector asks the targeted rank to send one frame with a corrupt payload checksum, and ftccl
must catch it, have the chunk resent and carry on with exact results. A CCL that serves no
fault hook (Gloo) is skipped with that reason instead of failing halfway."""
import glob
import json
import os

from test_run import fl, namespaces_possible, scenario  # noqa: F401


def test_conn_corrupt_is_survived(fl):  # noqa: F811
    r = fl.run(scenario("conn_corrupt.yaml"))
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    rep = fl.report()
    assert rep["outcome"] == "survived", rep["outcome"]
    assert rep["correctness"]["wrong"] == 0
    assert rep["correctness"]["checked"] not in (False, 0, None)
    hook = rep["environment"]["fault_hook"]
    assert hook["served"] is True and len(hook["paths"]) == 2, hook
    assert [f["id"] for f in rep["faults"]] == ["c0", "c1"]
    for f in rep["faults"]:
        assert f["applied_s"] is not None, f
        # Read back from the rank through its hook: the damaged frame went out.
        obs = f["observed"]
        assert obs["in_effect"] is True, f
        assert obs["corrupt_frames_sent"] == 1, f
        assert "error" not in f or not f["error"], f
    # The sockets are gone with their ranks.
    assert glob.glob(os.path.join(fl.out, "ranks", "*.hook")) == []
    for p in hook["paths"]:
        assert not os.path.exists(p), p
    fl.assert_nothing_left(rep["environment"]["run_id"])


def test_corrupt_header_drops_that_connection_until_reconnected(fl):  # noqa: F811
    r = fl.run(scenario("conn_corrupt_header.yaml"))
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    rep = fl.report()
    assert rep["outcome"] == "survived", rep["outcome"]
    assert rep["correctness"]["wrong"] == 0
    (f,) = rep["faults"]
    assert f["observed"]["in_effect"] is True and f["observed"]["corrupt_frames_sent"] == 1, f
    with open(os.path.join(fl.out, "events.jsonl")) as ev:
        events = [e for e in map(json.loads, ev) if e["type"] == "ccl_event"]
    after = [e for e in events if e["t_s"] >= f["applied_s"]]
    # Both ends give up the connection on rail 0 and move its chunks; rail 1 never goes down.
    down = {(e["rank"], e["path"]) for e in after if e["kind"] == "path_down"}
    assert down == {(0, 0), (1, 0)}, events
    assert any(e["kind"] == "path_down" and e["rank"] == 1 and "corrupt frame header" in e["reason"]
               for e in after), events
    assert {e["rank"] for e in after if e["kind"] == "migrated"} == {0, 1}, events
    # The connection is re-established and rail 0 comes back on both ends.
    up = {(e["rank"], e["path"]) for e in after if e["kind"] == "path_up"}
    assert {(0, 0), (1, 0)} <= up, events
    fl.assert_nothing_left(rep["environment"]["run_id"])


def test_gloo_serves_no_fault_hook(fl):  # noqa: F811
    r = fl.run(scenario("conn_corrupt.yaml"), "--ccl", "gloo")
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    assert "py-conn-corrupt skipped: ccl gloo serves no fault hook" in log, log
    # Nothing was started.
    assert not os.path.exists(os.path.join(fl.out, "report.json"))
