"""ftccl under real network faults, through `faultline run`: the data path must detect the
fault (from the link state, a peer's notice or missing acknowledgements), move its traffic to
the surviving rail without losing or corrupting anything, and say so in its events."""
import json
import os

import pytest

from test_run import fl, namespaces_possible, scenario  # noqa: F401


def ccl_events(out_dir):
    with open(os.path.join(out_dir, "events.jsonl")) as f:
        return [e for e in map(json.loads, f) if e["type"] == "ccl_event"]


def run_and_check(fl, name):  # noqa: F811
    r = fl.run(scenario(name))
    assert r.returncode in (0, 1), r.stdout + r.stderr
    rep = fl.report()
    assert rep["outcome"] == "survived", rep["outcome"]
    assert rep["correctness"]["wrong"] == 0
    fault = rep["faults"][0]
    assert fault["applied_s"] is not None and fault["reverted_s"] is not None, fault
    fl.assert_nothing_left(rep["environment"]["run_id"])
    return rep


@pytest.mark.parametrize("name,max_detect_ms", [
    ("link_down_rail0.yaml", 100),     # the rank's own link goes down: netlink
    ("link_down_switch.yaml", 100),    # carrier loss on one side, the peer's notice on the other
    ("blackhole_rail0.yaml", 1500),    # nothing but missing acknowledgements
])
def test_fault_is_detected_and_survived(fl, name, max_detect_ms):  # noqa: F811
    rep = run_and_check(fl, name)
    m = rep["per_fault"][0]
    assert m["detection_ms"] is not None, "ftccl emitted no path_down event for the fault"
    assert 0 <= m["detection_ms"] <= max_detect_ms, m
    assert m["failover_latency_ms"] is not None, "no chunk was acknowledged after the fault"
    assert m["failover_latency_ms"] <= max_detect_ms + 500, m
    rail = rep["faults"][0]["target"]["rail"]
    applied = rep["faults"][0]["applied_s"]
    kinds = [e["kind"] for e in ccl_events(fl.out) if e["path"] == rail and e["t_s"] >= applied]
    assert "path_down" in kinds and "migrated" in kinds, kinds
    # The path comes back once the fault is reverted.
    assert "path_up" in kinds, kinds
