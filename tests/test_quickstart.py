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
    # The refusal's whole message, wrapped without breaking a word: not cut off at the
    # first "." (which was inside the path of the file that chose the engine).
    assert lines[6] == "switching globally is refused:"
    message = " ".join(line.strip() for line in lines[7:-1])
    assert message.startswith(
        "Domain 'mylib' already runs on engine 'fast' (chosen by an earlier enable_engine at "
        f"{site / 'quickstart_demo.py'}:"
    )
    assert message.endswith(
        "Call enable_engine earlier, or run the code that needs 'reference' inside "
        "`with coheriq.using_engine('mylib', 'reference'):`."
    )
    assert "MYLIB_ENGINE=fast" in lines[-1] and "backend=fast" in lines[-1]
