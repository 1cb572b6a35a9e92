"""An engine (another team's package): re-implements both candidates of mylib."""

import coheriq


class Fast(coheriq.engine_class("mylib"), name="fast"):
    """Engine "fast": its state lives on the instance, created once per process."""

    def __init__(self) -> None:
        self.calls = 0

    def normalize(self, xs: list[float]) -> list[float]:
        self.calls += 1
        inverse = 1.0 / sum(xs)
        return [x * inverse for x in xs]

    class Histogram:
        def __init__(self, values: list[float], bins: int = 4) -> None:
            counts = [0] * bins
            for v in values:
                counts[min(int(v * bins), bins - 1)] += 1
            self.counts = counts

        @property
        def backend(self) -> str:
            return "fast"
