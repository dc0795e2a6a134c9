"""End-to-end tests of `faultline inject` and `faultline cleanup` on namespaces the tests
create. State is read back with iproute2, never from faultline's own output alone."""
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FAULTLINE_BUILD", os.path.join(ROOT, "build"))
FAULTLINE = os.path.join(BUILD, "bin", "faultline")


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def link(ns, dev):
    out = sh("ip", "-n", ns, "-j", "link", "show", "dev", dev, check=False)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)[0]


@pytest.fixture
def env(tmp_path):
    if not os.path.exists(FAULTLINE):
        pytest.skip(f"{FAULTLINE} is not built")
    ns = f"fl-py{os.getpid()}-{time.monotonic_ns() % 100000}"
    if sh("ip", "netns", "add", ns, check=False).returncode != 0:
        pytest.skip("cannot create network namespaces here")
    try:
        sh("ip", "-n", ns, "link", "add", "name", "h0", "type", "veth", "peer", "name", "s0")
        sh("ip", "-n", ns, "link", "set", "h0", "up")
        sh("ip", "-n", ns, "link", "set", "s0", "up")
        # The kernel raises a veth pair's carrier asynchronously after both ends are up: wait
        # until it has, so that a test's "before" is the settled state (a busy machine showed
        # NO-CARRIER/LOWERLAYERDOWN there, and the carrier coming up afterwards looked like a
        # change the command made).
        deadline = time.monotonic() + 10
        while any("NO-CARRIER" in link(ns, d)["flags"] or link(ns, d)["operstate"] != "UP"
                  for d in ("h0", "s0")):
            assert time.monotonic() < deadline, f"veth h0/s0 in {ns} never got a carrier"
            time.sleep(0.01)
        e = dict(os.environ, FAULTLINE_JOURNAL_DIR=str(tmp_path / "journal"))
        e.pop("FAULTLINE_ALLOW", None)
        yield ns, e
    finally:
        subprocess.run([FAULTLINE, "cleanup"], env=dict(os.environ,
                       FAULTLINE_JOURNAL_DIR=str(tmp_path / "journal")), capture_output=True)
        sh("ip", "netns", "del", ns, check=False)


def run(env, *args, **kw):
    return subprocess.run([FAULTLINE, *args], env=env, capture_output=True, text=True,
                          timeout=30, **kw)


def test_link_down_for_200ms_json(env):
    ns, e = env
    before = link(ns, "h0")["flags"]
    t0 = time.monotonic()
    r = run(e, "inject", "link_down", "--netns", ns, "--dev", "h0", "--for", "200ms", "--json")
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["kind"] == "link_down"
    assert rec["apply"]["observed"]["in_effect"] is True
    assert rec["apply"]["observed"]["link"]["admin_up"] is False
    assert rec["revert"]["observed"]["in_effect"] is False
    held = rec["revert"]["applied_ns"] - rec["apply"]["applied_ns"]
    assert 200e6 <= held < 400e6
    assert elapsed >= 0.2
    assert link(ns, "h0")["flags"] == before


def test_switch_side_leaves_host_with_no_carrier(env):
    ns, e = env
    p = subprocess.Popen([FAULTLINE, "inject", "link_down", "--netns", ns, "--dev", "h0",
                          "--side", "switch"], env=e, stdout=subprocess.PIPE, text=True)
    try:
        assert "applied" in p.stdout.readline()
        h0 = link(ns, "h0")
        assert "UP" in h0["flags"] and "NO-CARRIER" in h0["flags"]
        assert "UP" not in link(ns, "s0")["flags"]
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=10) == 0
    assert "UP" in link(ns, "s0")["flags"]


@pytest.mark.parametrize("args,needle", [
    (["link_down", "--dev", "nope0"], "unknown interface 'nope0'"),
    (["warp_core_breach", "--dev", "h0"], "unknown fault kind 'warp_core_breach'"),
    (["link_down", "--dev", "h0", "--for", "5 fortnights"], "malformed duration"),
    (["delay", "--dev", "h0", "--delay", "10ms"], "sch_netem"),
])
def test_refusals_exit_nonzero_and_change_nothing(env, args, needle):
    ns, e = env
    before = sh("ip", "-n", ns, "-j", "link").stdout
    qd = sh("tc", "-n", ns, "qdisc", "show").stdout
    r = run(e, "inject", args[0], "--netns", ns, *args[1:])
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr
    assert sh("ip", "-n", ns, "-j", "link").stdout == before
    assert sh("tc", "-n", ns, "qdisc", "show").stdout == qd


def test_namespace_outside_allowlist_is_refused(env):
    _, e = env
    user_ns = f"user-py{os.getpid()}"
    sh("ip", "netns", "add", user_ns)
    try:
        r = run(e, "inject", "link_down", "--netns", user_ns, "--dev", "lo")
        assert r.returncode == 2
        assert "outside the allowlist" in r.stderr
    finally:
        sh("ip", "netns", "del", user_ns)


def test_cleanup_after_sigkill_restores_state(env):
    ns, e = env
    p1 = subprocess.Popen([FAULTLINE, "inject", "link_down", "--netns", ns, "--dev", "h0"],
                          env=e, stdout=subprocess.PIPE, text=True)
    p2 = subprocess.Popen([FAULTLINE, "inject", "bandwidth", "--netns", ns, "--dev", "s0",
                           "--rate", "10mbit"], env=e, stdout=subprocess.PIPE, text=True)
    assert "applied" in p1.stdout.readline()
    assert "applied" in p2.stdout.readline()
    p1.kill()
    p2.kill()
    p1.wait()
    p2.wait()
    assert "UP" not in link(ns, "h0")["flags"]
    assert "tbf" in sh("tc", "-n", ns, "qdisc", "show", "dev", "s0").stdout
    r = run(e, "cleanup", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["undone"] == 2
    assert "UP" in link(ns, "h0")["flags"]
    assert "tbf" not in sh("tc", "-n", ns, "qdisc", "show", "dev", "s0").stdout
    r = run(e, "cleanup", "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["undone"] == 0
