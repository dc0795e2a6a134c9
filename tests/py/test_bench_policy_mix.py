"""bench/policy-mix's tables from a hand-made summary JSON (--render FILE: no runs, no root):
a run counts only when it survived with no wrong result and the twin's param_sha256; a run
gated out is listed with why and never averaged in; a policy with a gated-out cell has no
geometric mean over the mix; adaptive is compared with each fixed policy only where both
count; the decision reaction is reported as p50/p99."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "policy-mix")
POLICIES = ["fail_stop", "failover", "wait", "shrink", "adaptive"]
TWIN = "a" * 64


def run(scenario, policy, ratio, outcome="survived", wrong=0, sha=TWIN, decisions=()):
    r = {"mix": "judged", "scenario": scenario, "seed": 1, "policy": policy,
         "outcome": outcome, "wrong": wrong, "param_sha256": sha, "twin_param_sha256": TWIN,
         "useful_samples": 3600 if sha == TWIN else 2700, "twin_useful_samples": 3600,
         "goodput_ratio": ratio, "decisions": list(decisions)}
    return r


def summary(runs, scenarios):
    return {"schema": "faultline.policy-mix-summary.v1", "command": "bench/policy-mix",
            "git_commit": "0000000", "label": "synthetic", "started_utc": "2026-01-01 00:00 UTC",
            "cores": 2, "seeds": 1, "load_before": 0.5, "load_after": 0.7,
            "mixes": {"judged": {"dir": "scenarios/policy/mix", "scenarios": scenarios,
                                 "runs": runs, "missing": [],
                                 "runs_with_invalid_decision_lines": 0,
                                 "library_settings": {"note": "as stated"}}}}


def render(tmp_path, s):
    p = tmp_path / "summary.json"
    p.write_text(json.dumps(s))
    r = subprocess.run([sys.executable, SCRIPT, "--render", str(p)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def row(out, name):
    [line] = [l for l in out.splitlines() if l.startswith(f"| {name} |")]
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_gate_keeps_wrong_and_different_results_out_of_the_averages(tmp_path):
    ratios = {"fail_stop": 0.8, "failover": 0.9, "wait": 0.7, "shrink": 0.95, "adaptive": 0.92}
    runs = [run("a", p, v) for p, v in ratios.items()]
    b = {"fail_stop": 0.6, "failover": 0.5, "wait": 0.5, "shrink": 0.99, "adaptive": 0.98}
    for p, v in b.items():
        if p == "shrink":
            runs.append(run("b", p, v, sha="b" * 64))  # trained fewer samples than the twin
        elif p == "wait":
            runs.append(run("b", p, v, wrong=3))
        elif p == "fail_stop":
            runs.append(run("b", p, v, outcome="aborted_clean"))
        else:
            runs.append(run("b", p, v, decisions=[
                {"t_s": 3.1, "chosen": "failover", "trigger": "path_down", "latency_ms": 0.01,
                 "reaction_ms": r} for r in (40.0, 60.0, 80.0)] if p == "adaptive" else []))
    out = render(tmp_path, summary(runs, ["a", "b"]))
    a = row(out, "a")
    assert a[:5] == ["0.800 (1/1)", "0.900 (1/1)", "0.700 (1/1)", "0.950 (1/1)", "0.920 (1/1)"]
    assert a[5] == f"{0.92 / 0.95:.3f}"
    b_row = row(out, "b")
    # Gated out: no value in the cell, whatever its ratio was.
    assert b_row[0] == "— (0/1) ✗" and b_row[2] == "— (0/1) ✗" and b_row[3] == "— (0/1) ✗"
    assert b_row[1] == "0.500 (1/1)" and b_row[4] == "0.980 (1/1)"
    assert b_row[5] == f"{0.98 / 0.5:.3f}"  # against the best fixed policy that counted
    geo = row(out, "**geometric mean**")
    assert geo[0] == geo[2] == geo[3] == "—"  # a gated-out cell: no mean over the mix
    assert geo[1] == f"{(0.9 * 0.5) ** 0.5:.3f}" and geo[4] == f"{(0.92 * 0.98) ** 0.5:.3f}"
    assert "b / shrink (seed 1, goodput_ratio 0.990): param_sha256 differs from the twin's " \
           "(2700 of 3600 samples)" in out
    assert "b / wait (seed 1, goodput_ratio 0.500): wrong results 3" in out
    assert "b / fail_stop (seed 1, goodput_ratio 0.600): outcome aborted_clean" in out
    # Adaptive against each fixed policy over the scenarios where both count.
    assert f"shrink {0.92 / 0.95:.3f} over 1 of 2" in out
    assert f"failover {((0.92 * 0.98) ** 0.5) / ((0.9 * 0.5) ** 0.5):.3f} over 2 of 2" in out
    assert "3 decisions, p50 60.0 ms, p99 80.0 ms" in out


def test_a_summary_of_another_schema_is_refused(tmp_path):
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"schema": "something.else"}))
    r = subprocess.run([sys.executable, SCRIPT, "--render", str(p)], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "not a faultline.policy-mix-summary.v1" in r.stderr


def test_a_shrunk_job_counts_only_when_it_shrank_and_its_replicas_agree(tmp_path):
    """A job that shrank cannot hold the twin's parameters (fewer replicas' gradients after the
    shrink): it counts when every shrink completed and the replicas agree on one hash, and is
    listed as such; a different hash without a shrink, a failed shrink, or replicas that
    disagree (param_sha256 null) stay gated out, whatever the policy."""
    runs = []
    for p in POLICIES:
        r = run("a", p, 0.8, sha="b" * 64)
        r["shrinks"], r["shrinks_ok"] = (1, True) if p in ("shrink", "adaptive") else (0, True)
        runs.append(r)
    failed = run("b", "shrink", 0.7, sha="c" * 64)
    failed["shrinks"], failed["shrinks_ok"] = 1, False
    disagree = run("b", "adaptive", 0.75, sha=None)
    disagree["shrinks"], disagree["shrinks_ok"] = 1, True
    runs += [failed, disagree] + [run("b", p, 0.9) for p in ("fail_stop", "failover", "wait")]
    out = render(tmp_path, summary(runs, ["a", "b"]))
    a = row(out, "a")
    assert a[:5] == ["— (0/1) ✗", "— (0/1) ✗", "— (0/1) ✗", "0.800 (1/1)", "0.800 (1/1)"], a
    assert "- a / shrink (seed 1, 2700 of 3600 samples, goodput_ratio 0.800)" in out
    assert "a / failover (seed 1, goodput_ratio 0.800): param_sha256 differs" in out
    b_row = row(out, "b")
    assert b_row[3] == "— (0/1) ✗" and b_row[4] == "— (0/1) ✗", b_row
    assert "b / adaptive (seed 1, goodput_ratio 0.750): no common param_sha256" in out
    assert "b / shrink (seed 1, goodput_ratio 0.700): param_sha256 differs" in out
