"""Engine "fast" of mylib: the same results, with fewer passes over the data."""

import threading

# The library first: importing it creates the domain "mylib", which the engine
# class below derives from. Without this line, importing this module before mylib
# fails with coheriq.CoheriqDomainNotFoundError.
import mylib

import coheriq


class Workspace:
    """The engine's state, made once per process.

    A real engine keeps a device handle, a thread pool or compiled kernels here;
    this one counts the calls it served.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0

    def count(self) -> None:
        with self._lock:  # every thread that runs on the engine shares the workspace
            self.calls += 1


_workspace: Workspace | None = None
_workspace_lock = threading.Lock()


def workspace() -> Workspace:
    """The one workspace of this process: the engine and its classes both use it."""
    global _workspace
    with _workspace_lock:
        if _workspace is None:
            _workspace = Workspace()
        return _workspace


class Fast(coheriq.engine_class("mylib"), name="fast"):
    """Engine "fast" of mylib."""

    def __init__(self) -> None:
        # Runs once per process, when the engine is first chosen: check here that
        # the engine can run on this machine, and raise with the reason if not.
        self.workspace = workspace()

    def normalize(self, xs: list[float]) -> list[float]:
        self.workspace.count()
        inverse = 1.0 / sum(xs)
        return [x * inverse for x in xs]

    class Histogram:
        """mylib.Histogram for engine "fast": the same ``counts``, in one pass."""

        def __init__(self, values: list[float], bins: int = 4) -> None:
            # Called by mylib.Histogram(...) with the user's arguments only, not
            # with the engine instance: the engine's state is reached through the module.
            workspace().count()
            counts = [0] * bins
            last = bins - 1
            for v in values:
                b = int(v * bins)
                counts[b if b < last else last] += 1
            self.counts = counts

    def density(self, histogram: mylib.Histogram) -> list[float]:
        # Any engine's histogram may arrive here, the reference's included: read it
        # through the library's public surface (counts) only.
        self.workspace.count()
        inverse = 1.0 / sum(histogram.counts)
        return [count * inverse for count in histogram.counts]

    # mean is not overridden: under this engine, mylib.mean runs the library's code.
