"""Headless-Chromium checks shared by the tests of every page the project writes
(report.html, a suite's index.html, trend.html, simulation.html): the page is rendered at a
given width and fails on an overflow (a table, plot or preformatted block past the right edge
of the page's column, unless it scrolls inside a box that fits; or the page scrolling sideways) or on raw Markdown markers in the text a
reader sees ('### ', '|---|', '**bold**'; quoted <pre>/<code> blocks aside). The measurement runs as a script in a copy of the
page without its Content-Security-Policy (which forbids scripts)."""
import html
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]

MEASURE = """<script>(function(){
var b=document.body.getBoundingClientRect(),wide=[],raw=[];
// A wide element inside a box that scrolls sideways is fine as long as the box fits.
function boxOf(e){for(var a=e.parentElement;a&&a!==document.body;a=a.parentElement){
  var o=getComputedStyle(a).overflowX;if(o==='auto'||o==='scroll')return a;}return e;}
document.querySelectorAll('table,svg,pre,img').forEach(function(e){
  var r=boxOf(e).getBoundingClientRect();
  if(Math.ceil(r.right)>Math.floor(b.right)+1)
    wide.push(e.tagName.toLowerCase()+(e.id?'#'+e.id:'')+':'+Math.ceil(r.right));});
// Preformatted blocks (a scenario file, logs) are quoted as they are: not read for Markdown.
document.querySelectorAll('pre,code').forEach(function(e){e.style.display='none';});
document.body.innerText.split('\\n').forEach(function(l){
  if(/^#{1,6} /.test(l)||/^\\s*\\|?\\s*:?-{3,}:?\\s*\\|/.test(l)||/\\*\\*[^*\\s][^*]*\\*\\*/.test(l))
    raw.push(l.slice(0,120));});
document.body.setAttribute('data-check',JSON.stringify({body:Math.floor(b.right),
  scroll:document.documentElement.scrollWidth,inner:window.innerWidth,wide:wide,
  raw:raw.slice(0,5)}));})();</script>"""


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed; scripts/install-deps installs it (apt package chromium)")


def run_chromium(url, *extra):
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                              capture_output=True, text=True, timeout=120)


def check_page(path, tmp_dir, width=1400, screenshot=True):
    """Renders `path` at `width` px; asserts no overflow and no raw Markdown; with
    `screenshot`, also draws the page (a non-trivial PNG). Returns the measurement."""
    page = open(path, encoding="utf-8").read()
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    page = page.replace("</body>", MEASURE + "</body>") if "</body>" in page else page + MEASURE
    copy = os.path.join(str(tmp_dir), "measured-" + os.path.basename(path))
    with open(copy, "w", encoding="utf-8") as f:
        f.write(page)
    p = run_chromium("file://" + copy, "--dump-dom", f"--window-size={width},900")
    assert p.returncode == 0, p.stderr[-2000:]
    m = re.search(r'data-check="([^"]*)"', p.stdout)
    assert m, f"{path}: the measuring script did not run"
    got = json.loads(html.unescape(m.group(1)))
    assert not got["wide"], f"{path}: past the page's right edge ({got['body']} px): {got['wide']}"
    assert got["scroll"] <= got["inner"], f"{path}: the page scrolls sideways: {got}"
    assert not got["raw"], f"{path}: raw Markdown in the rendered text: {got['raw']}"
    if screenshot:
        shot = os.path.join(str(tmp_dir), os.path.basename(path) + ".png")
        p = run_chromium("file://" + os.path.abspath(path), f"--screenshot={shot}",
                         f"--window-size={width},1600")
        assert p.returncode == 0 and os.path.getsize(shot) > 20000, (p.stderr[-1000:], shot)
    return got
