"""The README's demo runs: library, engine (found through its entry point) and user."""

import shutil
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parent.parent / "example" / "quickstart"


def test_quickstart_demo_runs(make_dist):
    site = make_dist("coheriq_quickstart", {}, {"coheriq.engines.mylib": {"fast": "mylib_fast"}})
    for module in ("mylib.py", "mylib_fast.py", "quickstart_demo.py"):
        shutil.copy(QUICKSTART / module, site / module)
    result = subprocess.run(
        [sys.executable, "-c", "import quickstart_demo; quickstart_demo.main()"],
        cwd=site,
        env={"PYTHONPATH": str(site), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "engines advertised for mylib: ('fast',)"
    assert lines[1:3] == ["mylib_fast imported yet? False", "mylib_fast imported yet? True"]
    assert "engine=fast" in lines[3] and "backend=fast" in lines[3]
    assert "engine=reference" in lines[4] and "backend=reference" in lines[4]
    assert "engine=fast" in lines[5]
    assert lines[6].startswith("switching globally is refused: Domain 'mylib' already runs")
    assert "MYLIB_ENGINE=fast" in lines[7] and "backend=fast" in lines[7]
