"""Per-rail throughput from the kernel's counters (rails.csv, per_fault[].rails) on real runs:
the rails a library uses carry traffic, the ones it does not read below 1 Mbps, and a port
that is down reads ~0 while its neighbour carries the load. Every test checks afterwards that
the run left nothing behind."""
import csv
import os

import pytest

from test_run import fl, namespaces_possible, scenario  # noqa: F401 (fixtures)

# A rail the library does not use: below 1 Mbps in every 20 ms sample interval (DESIGN.md).
UNUSED_GBPS = 0.001
# A rail it uses: the rails are shaped to 1 Gbit/s and a 1 MiB allreduce loop keeps them busy
# (measured ~0.4-0.5 Gbit/s average per direction on a loaded 2-core machine); 50 Mbit/s is
# 50x the unused-rail limit and a tenth of what was measured.
USED_GBPS = 0.05


def rails_table(e):
    with open(os.path.join(e.out, "rails.csv")) as f:
        rows = list(csv.DictReader(f))
    assert rows, "rails.csv has no row"
    return rows


def total_bytes(rows, col):
    """Bytes counted in `col` over the whole sampled run (rate x interval)."""
    out, prev = 0.0, None
    for x in rows:
        t = float(x["t_s"])
        if prev is not None and x[col] != "":
            out += float(x[col]) * 1e9 / 8 * (t - prev)
        prev = t
    return out


def window(rows, t_from, t_to):
    return [r for r in rows if t_from <= float(r["t_s"]) <= t_to]


def mean(rows, col):
    vals = [float(r[col]) for r in rows if r[col] != ""]
    assert vals, f"{col}: no sample with a rate"
    return sum(vals) / len(vals)


def check_common(e, r, rows):
    assert r["files"]["rails"] == "rails.csv"
    assert r["rails"]["sampled"] is True
    assert "errors" not in r["rails"], r["rails"]
    cols = set(rows[0].keys())
    for h in (0, 1):
        for rail in (0, 1):
            for d in ("tx", "rx"):
                assert f"h{h}_r{rail}_{d}_gbps" in cols
    t = [float(x["t_s"]) for x in rows]
    assert t == sorted(t)
    assert t[0] < 0, "sampling starts before the ranks' time zero"
    # ~20 ms apart over the whole run: at least 80% of the ticks of the sampled span.
    assert len(t) >= 0.8 * (t[-1] - t[0]) / 0.02, (len(t), t[0], t[-1])
    e.assert_nothing_left(r["environment"]["run_id"])


def measured_span(e):
    """[end of warm-up, last collective end] in seconds from t0."""
    with open(os.path.join(e.out, "timeseries.csv")) as f:
        ends = [float(x["end_s"]) for x in csv.DictReader(f)]
    assert ends
    return 0.5, max(ends)


def test_gloo_uses_rail0_only(fl):
    p = fl.run(scenario("rails_clean.yaml"), "--ccl", "gloo")
    assert p.returncode == 0, p.stdout + p.stderr
    r = fl.report()
    rows = rails_table(fl)
    check_common(fl, r, rows)
    lo, hi = measured_span(fl)
    busy = window(rows, lo, hi)
    for h in (0, 1):
        for d in ("tx", "rx"):
            assert mean(busy, f"h{h}_r0_{d}_gbps") > USED_GBPS, (h, d)
            # Rail 1, over the whole sampled run (also before t0 and after the ranks ended).
            worst = max(float(x[f"h{h}_r1_{d}_gbps"]) for x in rows if x[f"h{h}_r1_{d}_gbps"])
            assert worst < UNUSED_GBPS, (h, d, worst)
            # Not one frame: Gloo sends no IPv4 on rail 1 and IPv6 is off on rail ports (with
            # IPv6 on, router solicitations and MLD reports put ~160 B tx / ~390 B rx on each
            # port in a 4 s run).
            assert total_bytes(rows, f"h{h}_r1_{d}_gbps") < 1, (h, d)


def test_ftccl_uses_every_rail(fl):
    p = fl.run(scenario("rails_clean.yaml"))
    assert p.returncode == 0, p.stdout + p.stderr
    r = fl.report()
    rows = rails_table(fl)
    check_common(fl, r, rows)
    lo, hi = measured_span(fl)
    busy = window(rows, lo, hi)
    for h in (0, 1):
        for rail in (0, 1):
            for d in ("tx", "rx"):
                assert mean(busy, f"h{h}_r{rail}_{d}_gbps") > USED_GBPS, (h, rail, d)


def test_link_down_reads_zero_on_the_port_and_rail1_carries(fl):
    p = fl.run(scenario("rails_link_down.yaml"))
    assert p.returncode == 0, p.stdout + p.stderr
    r = fl.report()
    rows = rails_table(fl)
    check_common(fl, r, rows)
    f = r["faults"][0]
    assert f["applied_s"] is not None and f["reverted_s"] is not None
    pf = r["per_fault"][0]
    ports = {(w["host"], w["rail"]): w for w in pf["rails"]}
    assert set(ports) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    down, other = ports[(0, 0)], ports[(0, 1)]
    assert down["before_gbps"] > USED_GBPS, down
    assert down["during_gbps"] < UNUSED_GBPS, down
    assert down["during_tx_gbps"] < UNUSED_GBPS and down["during_rx_gbps"] < UNUSED_GBPS
    assert other["during_gbps"] > USED_GBPS, other
    assert down["after_gbps"] is not None
    # The same from rails.csv: every sample interval inside the fault reads ~0 on the port.
    inside = window(rows, f["applied_s"] + 0.03, f["reverted_s"] - 0.01)
    assert len(inside) > 50
    for x in inside:
        for d in ("tx", "rx"):
            assert x[f"h0_r0_{d}_gbps"] == "" or float(x[f"h0_r0_{d}_gbps"]) < UNUSED_GBPS, x
