"""The concern -> path tables of the READMEs name paths that exist."""
import itertools
import pathlib
import re

import pytest

TOP = pathlib.Path(__file__).resolve().parents[2]
TABLES = ["README.md", "ccl/README.md"]


def _expand(path):
    """`a/{h,cc}` -> a.h, a.cc; `<kind>` -> every folder of runner/faults; `<name>` -> any."""
    m = re.search(r"\{([^}]*)\}", path)
    if m:
        for alt in m.group(1).split(","):
            yield from _expand(path[: m.start()] + alt + path[m.end():])
        return
    yield path


def _table_paths(readme):
    """Every `code` cell of the rows of the 'Where ...' tables that looks like a path."""
    text = (TOP / readme).read_text()
    paths = []
    in_table = False
    for line in text.splitlines():
        if line.startswith("#"):
            in_table = "where" in line.lower()
            continue
        if in_table and line.startswith("|") and not line.startswith("|---"):
            cell = line.rstrip("|").split("|")[-1]
            paths += [p for p in re.findall(r"`([^`]+)`", cell) if "/" in p or "." in p]
    return paths


@pytest.mark.parametrize("readme", TABLES)
def test_every_path_in_the_concern_table_exists(readme):
    paths = _table_paths(readme)
    assert len(paths) >= 15, f"{readme}: the concern table is missing or empty"
    base = TOP if readme == "README.md" else TOP / pathlib.Path(readme).parent
    kinds = sorted(p.name for p in (TOP / "runner/faults").iterdir() if p.is_dir())
    missing = []
    for p in paths:
        for concrete in _expand(p):
            if "<kind>" in concrete:
                candidates = [concrete.replace("<kind>", k) for k in kinds]
                if concrete.startswith("injector/"):
                    # netem kinds share injector/netem.cc (said in the table)
                    candidates = [c for c in candidates
                                  if (base / c).exists() or (base / "injector/netem.cc").exists()]
                    if not candidates:
                        missing.append(concrete)
                    continue
            elif "<name>" in concrete:
                pattern = concrete.replace("<name>", "*")
                candidates = [str(c.relative_to(base)) for c in base.glob(pattern)]
                if not candidates:
                    missing.append(concrete)
                continue
            else:
                candidates = [concrete]
            missing += [c for c in candidates if not (base / c).exists()]
    assert not missing, f"{readme} names paths that do not exist: {missing}"
