"""What every bench summary JSON says about where and when it was measured.

A figure from this 2-core machine means little without the load it was taken under, the commit
it measured and the command that made it; each bench that feeds a bench/README.md table puts
this block (`meta`) into its summary JSON and its caption is rendered from it, never typed.
"""
import datetime
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loadavg():
    """The 1, 5 and 15 minute load averages."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def git_commit():
    """HEAD's short hash, with "-dirty" when tracked files differ from it (Markdown files and
    bench/results/ aside: they change no measurement); None outside git."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":!*.md", ":!bench/results"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def start(label=None):
    """The block at the start of a measurement; finish() completes it."""
    return {"command": shlex.join(["bench/" + os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "started_utc": utc_now(), "git_commit": git_commit(), "nproc": os.cpu_count(),
            "load_start": loadavg(), "label": label}


def finish(meta):
    meta["ended_utc"] = utc_now()
    meta["load_end"] = loadavg()
    return meta


def caption(meta):
    """One line: when, at which commit, on how many cores, under which load, and the label."""
    load = lambda v: "%.2f" % v[0] if v else "?"
    text = ("Measured %s at commit %s on %s cores; load average %s at start, %s at end"
            % (meta.get("started_utc", "?"), meta.get("git_commit") or "?", meta.get("nproc", "?"),
               load(meta.get("load_start")), load(meta.get("load_end"))))
    if meta.get("label"):
        text += " (%s)" % meta["label"]
    return text + ".\n`%s`" % meta.get("command", "?")
