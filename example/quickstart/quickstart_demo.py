"""The user: turns the engine on with one line; the call sites stay as they are."""

import os
import subprocess
import sys
import textwrap

import mylib
from mylib import normalize  # imported before the engine is chosen: it follows anyway

import coheriq


def show(title: str) -> None:
    hist = mylib.Histogram([0.1, 0.3, 0.35, 0.9])
    print(
        f"{title:<36} engine={coheriq.active_implementation('mylib')!s:<10} "
        f"normalize={[round(x, 2) for x in normalize([1.0, 3.0])]} "
        f"Histogram.backend={hist.backend} counts={hist.counts}"
    )


def main() -> None:
    print("engines advertised for mylib:", coheriq.available_engines("mylib"))
    print("mylib_fast imported yet?", "mylib_fast" in sys.modules)
    coheriq.enable_engine("mylib", "fast")  # the one line
    print("mylib_fast imported yet?", "mylib_fast" in sys.modules)
    show("after enable_engine('mylib', 'fast')")
    with coheriq.using_engine("mylib", coheriq.REFERENCE):
        show("inside using_engine(reference)")
    show("after the with block")
    try:
        coheriq.enable_engine("mylib", coheriq.REFERENCE)
    except coheriq.CoheriqEngineSettledError as error:
        # The whole message, which says why and what to do instead; wrapped, and
        # never inside a word (a file's path stays whole).
        print("switching globally is refused:")
        print(textwrap.fill(str(error), 88, initial_indent="  ", subsequent_indent="  ",
                            break_long_words=False, break_on_hyphens=False))  # fmt: skip
    env = {**os.environ, "MYLIB_ENGINE": "fast"}
    code = "import quickstart_demo as d; d.show('in a child with MYLIB_ENGINE=fast')"
    sys.stdout.flush()  # the child writes to the same stream
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


if __name__ == "__main__":
    main()
