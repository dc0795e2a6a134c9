"""An inventory of this machine under the local launcher, and `faultline run --inventory`.

A host file whose every host has a loopback management address names interfaces of this
machine: the local launcher runs the ranks here, in its own network namespace, on those
interfaces, and faults act on them (allowlisted, journalled under the namespace's name).
`--inventory FILE` places a scenario written for the namespace topology on such a host file
unchanged. The fixture wires a private namespace the way the RDMA lab wires its guest: one
bridge per rail, a veth per host and rail, and policy routing that sends each address's packets
out of its own veth (the kernel would otherwise deliver them through lo), so a rail's traffic
really crosses its interface and a link fault on it cuts it. Checked with iproute2."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")

SCENARIO = """name: local-inventory
seed: 3
topology: {hosts: 2, ranks_per_host: 1, rails: 2, rail_gbps: 1}
ccl: ftccl
workload: {op: allreduce, dtype: f32, bytes: 1MiB, duration: 5s, warmup: 1s, check: true}
faults:
  - {id: down, at: 2s, type: link_down, target: {host: 1, rail: 0}, for: 1s}
expect: {outcome: survive, wrong_results: 0}
"""


def ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def host_file(path, hosts, addr="127.0.0.1", rails=2):
    lines = ["hosts:"]
    for h in range(hosts):
        devs = ", ".join(f"{{netdev: h{h}r{r}}}" for r in range(rails))
        lines.append(f"  - {{name: box{h}, addr: {addr}, rails: [{devs}]}}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module", autouse=True)
def built():
    if not os.access(FAULTLINE, os.X_OK):
        pytest.skip(f"{FAULTLINE} is not built (set FAULTLINE_BUILD)")
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")


@pytest.fixture
def fabric():
    """A namespace with two hosts of two rails: h<H>r<R> = 198.18.<R>.<10+H>."""
    ns = f"flinv{os.getpid()}"
    ip("netns", "del", ns, check=False)
    ip("netns", "add", ns)
    try:
        n = ["-n", ns]
        ip(*n, "link", "set", "lo", "up")
        for k in ("all", "default"):
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                            f"net.ipv4.conf.{k}.rp_filter=0", f"net.ipv4.conf.{k}.accept_local=1",
                            f"net.ipv4.conf.{k}.arp_ignore=1"], check=True)
        ip(*n, "rule", "add", "pref", "100", "lookup", "local")
        ip(*n, "rule", "del", "pref", "0")
        for r in range(2):
            ip(*n, "link", "add", f"br{r}", "type", "bridge")
            ip(*n, "link", "set", f"br{r}", "up")
            for h in range(2):
                dev, addr, table = f"h{h}r{r}", f"198.18.{r}.{10 + h}", str(100 + 10 * r + h)
                ip(*n, "link", "add", dev, "type", "veth", "peer", "name", dev + "s")
                ip(*n, "link", "set", dev + "s", "master", f"br{r}")
                ip(*n, "link", "set", dev + "s", "up")
                ip(*n, "link", "set", dev, "up")
                ip(*n, "addr", "add", addr + "/24", "dev", dev)
                ip(*n, "rule", "add", "pref", "10", "from", addr, "iif", "lo", "lookup", table)
                ip(*n, "route", "add", f"198.18.{r}.0/24", "dev", dev, "src", addr,
                   "table", table)
        yield ns
    finally:
        ip("netns", "del", ns, check=False)


def journal_env(tmp_path):
    """This test's own journal, not the machine's default (/run/faultline/journal), which a
    test running beside it would share."""
    return dict(os.environ, FAULTLINE_JOURNAL_DIR=str(tmp_path / "journal"))


def run_in(ns, *args, timeout=120, env=None):
    return subprocess.run(["ip", "netns", "exec", ns, FAULTLINE, *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def link(ns, dev):
    return json.loads(ip("-n", ns, "-j", "link", "show", dev).stdout)[0]


def test_a_netns_scenario_runs_on_this_machines_interfaces(fabric, tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text(SCENARIO)
    hosts = host_file(tmp_path / "hosts.yaml", 2)
    out = tmp_path / "out"
    r = run_in(fabric, "run", str(scen), "--inventory", hosts, "--out", str(out),
               env=journal_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"2 inventory hosts on this machine (network namespace {fabric})" in r.stdout
    rep = json.loads((out / "report.json").read_text())
    env = rep["environment"]
    assert env["launcher"] == "local"
    topo = env["topology"]
    assert topo["kind"] == "inventory" and topo["file"] == hosts
    assert [h["name"] for h in topo["hosts"]] == ["box0", "box1"]
    assert topo["hosts"][1]["mgmt_addr"] == "127.0.0.1"
    # veth reports its speed: the capacity is the kernel's, with its source.
    assert topo["hosts"][1]["rails"][0]["capacity_source"] == "netdev_speed"
    # The fault hit the named interface in this namespace, read back from the kernel.
    (f,) = rep["faults"]
    assert f["observed"]["link"] == {"admin_up": False, "carrier": False, "dev": "h1r0",
                                     "netns": fabric, "operstate": "down"}, f
    assert f["reverted_s"] > f["applied_s"]
    assert rep["outcome"] == "survived"
    assert rep["correctness"] == {"checked": True, "wrong": 0}
    # Both hosts' ranks joined over their own rails: traffic crossed every rail's interface.
    header = (out / "rails.csv").read_text().splitlines()[0].split(",")
    # An empty cell is a sample the kernel's counters could not price (rails.csv's null).
    rows = [[float(c) if c else None for c in line.split(",")] for line in
            (out / "rails.csv").read_text().splitlines()[1:]]
    for col in ("h0_r0_tx_gbps", "h0_r1_tx_gbps", "h1_r0_tx_gbps", "h1_r1_tx_gbps"):
        i = header.index(col)
        assert max(row[i] for row in rows if row[i] is not None) > 0.1, col
    # Healed, and nothing of the run is left: the link is up, no namespace was made. Other
    # tests make and remove namespaces meanwhile: the run's by their names (fl-<run id>-), and
    # of any name by its journal, which records each namespace before it is made.
    assert "UP" in link(fabric, "h1r0")["flags"]
    run_id = env["run_id"]
    assert run_id
    assert [n for n in ip("netns", "list").stdout.split() if n.startswith(f"fl-{run_id}-")] == []
    netns_entries = [e for e in (tmp_path / "journal").glob("*.json")
                     if json.loads(e.read_text()).get("kind") == "netns"]
    assert netns_entries == [], netns_entries


def test_qp_error_on_tcp_rails_is_skipped_with_the_inventory_reason(fabric, tmp_path):
    hosts = host_file(tmp_path / "hosts.yaml", 2)
    r = run_in(fabric, "run", os.path.join(ROOT, "scenarios", "nightly", "qp_error.yaml"),
               "--inventory", hosts, "--out", str(tmp_path / "out"), env=journal_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("inventory host box0 rail h0r0 names no RDMA port (rdma:), so ftccl "
                          "runs over TCP there and qp_error has no verbs QP to fail") == 8, r.stdout


def test_bad_placements_are_bad_input_and_leave_nothing(fabric, tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text(SCENARIO)
    links = ip("-n", fabric, "-j", "link", "show").stdout
    # The switch side of a real host's rail is not the runner's: refused at the fault.
    r = run_in(fabric, "run", os.path.join(ROOT, "scenarios", "nightly", "link_down.yaml"),
               "--inventory", host_file(tmp_path / "h2.yaml", 2), "--out", str(tmp_path / "o1"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "link_down.yaml:13:81: side: switch does not apply to an inventory host" in r.stderr
    # Three hosts for a two-host scenario.
    r = run_in(fabric, "run", str(scen), "--inventory", host_file(tmp_path / "h3.yaml", 3),
               "--out", str(tmp_path / "o2"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "s.yaml:3:11: the scenario does not fit the inventory" in r.stderr, r.stderr
    assert "it wants 2 hosts, the inventory lists 3" in r.stderr
    # An interface this namespace does not have.
    missing = tmp_path / "missing.yaml"
    missing.write_text("hosts:\n"
                       "  - {name: box0, addr: 127.0.0.1, rails: [{netdev: h0r0}, {netdev: h0r1}]}\n"
                       "  - {name: box1, addr: 127.0.0.1, rails: [{netdev: h9r0}, {netdev: h1r1}]}\n")
    r = run_in(fabric, "run", str(scen), "--inventory", str(missing), "--out", str(tmp_path / "o3"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"inventory host box1: no interface h9r0 in this network namespace ({fabric})" in r.stderr
    # Real hosts are not this machine's to run: Slurm reaches them.
    r = run_in(fabric, "run", str(scen), "--inventory",
               host_file(tmp_path / "real.yaml", 2, addr="10.0.0.1"), "--out", str(tmp_path / "o4"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "only an inventory whose every host is this machine (addr: 127.0.0.1)" in r.stderr
    assert ip("-n", fabric, "-j", "link", "show").stdout == links


TRAIN = """name: local-inventory-train
seed: 5
topology: {hosts: 2, ranks_per_host: 1, rails: 2, rail_gbps: 1}
ccl: ftccl
policy: failover
workload: {kind: train, steps: 80, batch: 4, compute: 20ms, grad_bytes: 256KiB,
           checkpoint_every: 20, wait_bound: 1s}
faults:
  - {id: down, at: 800ms, type: link_down, target: {host: 1, rail: 0}, for: 300ms}
expect: {outcome: survive}
"""


def test_a_placed_training_run_gets_its_own_fault_free_twin(fabric, tmp_path):
    """goodput_ratio divides by a fault-free twin that ran where the run ran: the same job on
    namespaces and on an inventory's interfaces are not twins, two runs on one inventory are."""
    scen = tmp_path / "train.yaml"
    scen.write_text(TRAIN)
    hosts = host_file(tmp_path / "hosts.yaml", 2)
    r = subprocess.run([FAULTLINE, "run", str(scen), "--out", str(tmp_path / "netns")],
                       capture_output=True, text=True, timeout=300, env=journal_env(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    reports = []
    for out in ("inv1", "inv2"):
        r = run_in(fabric, "run", str(scen), "--inventory", hosts, "--out", str(tmp_path / out),
                   timeout=300, env=journal_env(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
        reports.append(json.loads((tmp_path / out / "report.json").read_text()))
    assert [rep["train"]["twin"]["reused"] for rep in reports] == [False, True]
    twins = sorted(os.listdir(tmp_path / "twins"))
    assert len(twins) == 2, twins
    kinds = set()
    for t in twins:
        twin = json.loads((tmp_path / "twins" / t / "report.json").read_text())
        kinds.add((twin["environment"]["topology"] or {}).get("kind", "netns"))
    assert kinds == {"netns", "inventory"}, kinds
