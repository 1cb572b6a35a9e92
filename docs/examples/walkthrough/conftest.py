"""The walkthrough's files are installed and run by tests/test_walkthroughs.py.

Collected from here, the library's suite would import mylib from the source tree
instead: leave it to that test.
"""

collect_ignore = ["mylib", "mylib-fast", "user"]
