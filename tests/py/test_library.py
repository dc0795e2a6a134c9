"""The scenario library: every scenario under scenarios/ validates (matrices in full), the
importer's output validates, and a folder run over a small folder writes one run directory per
run (matrices expanded), a combined junit.xml and an index.html that links every run."""
import glob
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")
HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.join(HERE, "scenarios", "folder")

# Host files of inventory topologies (scenarios/inventory/hosts/) list hosts, not a scenario;
# the inventory scenarios that name them validate against them here. Fault spaces
# (scenarios/explore/) are the input of `faultline explore`, not scenarios; runner_explore_test
# parses them and tests/py/test_explore.py runs one.
LIBRARY = sorted(p for p in glob.glob(os.path.join(ROOT, "scenarios", "**", "*.yaml"),
                                      recursive=True)
                 if os.sep + "hosts" + os.sep not in os.path.relpath(p, ROOT)
                 and not os.path.relpath(p, ROOT).startswith(os.path.join("scenarios", "explore")))


def faultline(*args, env=None, timeout=60):
    return subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="session", autouse=True)
def built():
    if not os.access(FAULTLINE, os.X_OK):
        pytest.skip(f"{FAULTLINE} is not built (set FAULTLINE_BUILD)")


def test_library_has_nightly_and_incidents():
    rel = [os.path.relpath(p, os.path.join(ROOT, "scenarios")) for p in LIBRARY]
    assert sum(r.startswith("nightly/") for r in rel) >= 8, rel
    assert sum(r.startswith("incidents/") for r in rel) >= 3, rel


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_library_scenario_validates(path):
    r = faultline("validate", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": ok (" in r.stdout


def test_nightly_covers_every_fault_kind():
    """Every fault kind of the injector appears in the nightly suite, against the four
    collectives at a small and a large size."""
    kinds = {"link_down", "link_flap", "port_drop", "bandwidth", "loss", "blackhole", "delay",
             "jitter", "corrupt", "reorder", "conn_reset", "conn_corrupt", "qp_error",
             "rank_pause", "rank_kill"}
    text = ""
    for p in glob.glob(os.path.join(ROOT, "scenarios", "nightly", "*.yaml")):
        with open(p) as f:
            text += f.read()
    found = {k for k in kinds if f"type: {k}," in text or f"type: {k}}}" in text}
    assert found == kinds, f"missing: {kinds - found}"
    assert "side: switch" in text and "side: host" in text
    r = faultline("validate", os.path.join(ROOT, "scenarios", "nightly", "link_down.yaml"))
    assert "matrix of 8 runs" in r.stdout, r.stdout


def test_inventory_scenario_validates_against_its_host_file(tmp_path):
    """An inventory scenario validates against its host file and prints the hosts and RDMA
    rails; a packet-level fault on an RDMA rail is refused at the fault's line:col."""
    r = faultline("validate", os.path.join(ROOT, "scenarios", "inventory", "qp_error.yaml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rail 0 ens1f0np0 RDMA mlx5_0 port 1" in r.stdout, r.stdout
    bad = tmp_path / "loss.yaml"
    hosts = os.path.join(ROOT, "scenarios", "inventory", "hosts", "two_node.yaml")
    bad.write_text("name: l\n"
                   f"topology: {{kind: inventory, ranks_per_host: 1, file: {hosts}}}\n"
                   "workload: {op: allreduce, bytes: 1MiB, duration: 4s}\n"
                   "faults:\n"
                   "  - {id: l, at: 1s, type: loss, target: {host: node02, rail: 0}, "
                   "percent: 5%, for: 1s}\n")
    r = faultline("validate", str(bad))
    assert r.returncode == 2
    assert f"{bad}:5:5: fault 'l': loss cannot act on host 'node02' rail 0" in r.stderr, r.stderr
    # Real hosts are not this machine's namespaces: the local launcher refuses them, and
    # names the launcher that runs them.
    inline = os.path.join(ROOT, "scenarios", "inventory", "inline_tcp.yaml")
    r = faultline("run", inline)
    assert r.returncode == 2
    assert "cannot reach" in r.stderr and "--launcher slurm" in r.stderr, r.stderr
    # Through Slurm, hosts that are neither resolvable nor given an addr are bad input, said
    # before anything starts.
    env = dict(os.environ)
    env.pop("SLURM_JOB_ID", None)
    r = subprocess.run([FAULTLINE, "run", inline, "--launcher", "slurm", "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "inventory host 'node01'" in r.stderr and "'addr'" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "o" / "report.json")


def test_matrix_error_has_line_and_column(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: m\ntopology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
                   "matrix: {op: [allreduce, allgathr]}\n"
                   "workload: {bytes: 1MiB, duration: 3s}\n")
    r = faultline("validate", str(bad))
    assert r.returncode == 2
    assert f"{bad}:3:26: unknown workload.op 'allgathr' (in matrix combination op=allgathr)" \
        in r.stderr, r.stderr


KERNEL_LOG = """\
Mar  5 10:15:01 gpu-node17 kernel: [ 8122.998870] mlx5_core 0000:08:00.0: mlx5_port_module_event:1140:(pid 0): Port module event: module 0, Cable plugged
Mar  5 10:15:02 gpu-node17 kernel: [ 8123.402113] mlx5_core 0000:08:00.0 eth2: Link down
Mar  5 10:15:02 gpu-node17 kernel: [ 8123.402561] bond0: (slave eth2): link status definitely down, disabling slave
Mar  5 10:15:03 gpu-node17 kernel: [ 8124.913877] mlx5_core 0000:08:00.0 eth2: Link up
Mar  5 10:15:04 gpu-node17 kernel: [ 8125.010442] ice 0000:3b:00.0 ens1f0: NIC Link is Down
Mar  5 10:15:04 gpu-node17 kernel: [ 8125.771004] ice 0000:3b:00.0 ens1f0: NIC Link is up 100 Gbps Full Duplex, Requested FEC: RS-FEC, Negotiated FEC: RS-FEC, Autoneg Advertised: On, Autoneg Negotiated: False, Flow Control: None
Mar  5 10:15:06 gpu-node17 kernel: [ 8127.000000] mlx5_core 0000:08:00.0 eth2: Link down
"""

IP_MONITOR = """\
[2024-03-05T10:15:02.100000] 3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN group default
    link/ether 0c:42:a1:2b:3c:4d brd ff:ff:ff:ff:ff:ff
[2024-03-05T10:15:02.700000] 3: eth2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP group default
    link/ether 0c:42:a1:2b:3c:4d brd ff:ff:ff:ff:ff:ff
"""


def test_import_output_validates(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(KERNEL_LOG)
    out = tmp_path / "incident.yaml"
    r = faultline("import", str(log), "--map", "eth2=host0/rail1", "--map",
                  "ens1f0=host1/rail0/switch", "--at", "3s", "--name", "replay", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 fault(s) (1 permanent)" in r.stderr
    v = faultline("validate", str(out))
    assert v.returncode == 0, v.stderr
    text = out.read_text()
    assert "name: replay" in text
    # Kernel-clock times: the first outage at --at, 1.512 s long; the last one never ends.
    assert "{id: eth2-down1, at: 3s, type: link_down, target: {host: 0, rail: 1, side: host}, " \
           "for: 1512ms}" in text, text
    assert "side: switch}, for: 761ms}" in text, text
    assert "{id: eth2-down2, at: 6598ms, type: link_down, target: {host: 0, rail: 1, " \
           "side: host}}" in text, text


def test_import_ip_monitor_from_stdin_and_errors(tmp_path):
    r = subprocess.run([FAULTLINE, "import", "-", "--map", "eth2=host1/rail0"], input=IP_MONITOR,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "for: 600ms}" in r.stdout
    out = tmp_path / "ip.yaml"
    out.write_text(r.stdout)
    assert faultline("validate", str(out)).returncode == 0
    # Nothing mapped: bad input, and the devices that had events are named.
    bad = subprocess.run([FAULTLINE, "import", "-", "--map", "eth9=host1/rail0"],
                         input=IP_MONITOR, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert "devices with events: eth2" in bad.stderr
    bad = faultline("import", str(out), "--map", "eth2=rail0")
    assert bad.returncode == 2 and "expected DEVICE=hostH/railR" in bad.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="faultline run needs root")
def test_folder_run_writes_combined_junit_and_index(tmp_path):
    journal = str(tmp_path / "journal")
    env = dict(os.environ, FAULTLINE_JOURNAL_DIR=journal)
    env.pop("FAULTLINE_ALLOW", None)
    out = tmp_path / "out"
    r = faultline("run", FOLDER + "/", "--out", str(out), env=env, timeout=300)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log

    # Whether the kernel has sch_netem, asked on the lo of a network namespace of the probe's
    # own (gone with it), not the machine's: a qdisc there would delay every test's loopback
    # traffic and change the root namespace other tests compare before and after.
    netem = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root",
                            "netem", "delay", "1ms"], capture_output=True, text=True)
    has_netem = netem.returncode == 0

    dirs = {
        "py-folder-clean": "a_clean",
        "py-folder-link-down[op=allreduce]": "b_link_down/op=allreduce",
        "py-folder-link-down[op=allgather]": "b_link_down/op=allgather",
        "py-folder-netem": "c_needs_netem",
    }
    for name, d in dirs.items():
        with open(out / d / "report.json") as f:
            report = json.load(f)
        assert report["scenario"]["name"] == name
        if name == "py-folder-netem" and not has_netem:
            assert report["outcome"] == "skipped"
            assert "kernel lacks sch_netem" in report["skipped"]
        else:
            assert report["outcome"] == "survived", (name, report["outcome"])
            assert (out / d / "report.html").is_file()
    assert "skipped: kernel lacks sch_netem" in log or has_netem

    # One JUnit file over every run: a testsuite per run, named after it.
    root = ET.parse(out / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == set(dirs), set(suites)
    for name, s in suites.items():
        assert s.get("failures") == "0" and s.get("errors") == "0", name
        if name == "py-folder-netem" and not has_netem:
            assert s.get("skipped") == "1"
            (case,) = s.findall("testcase")
            skipped = case.find("skipped")
            assert skipped is not None, "a skipped run must not be a pass"
            assert "sch_netem" in skipped.get("message")
        else:
            assert s.get("skipped") == "0"
            names = [c.get("name") for c in s.findall("testcase")]
            assert names[0] == "outcome" and "expect.wrong_results" in names, names

    # The index links every run's reports, with its verdict.
    html = (out / "index.html").read_text().replace("<wbr>", "")  # wrap points aside
    for name, d in dirs.items():
        assert f"<td>{name}</td>" in html
        assert f'href="{d}/report.json"' in html
        if name != "py-folder-netem" or has_netem:
            assert f'href="{d}/report.html"' in html
    assert html.count(">PASS<") == (4 if has_netem else 3)
    assert (">SKIPPED<" in html) != has_netem
    assert 'href="junit.xml"' in html
