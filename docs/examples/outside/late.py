"""statistics, imported before it is accelerated: names bound before stay the library's."""

import statistics
from statistics import fmean  # bound before: it stays the unmarked function

import coheriq

coheriq.accelerate("statistics", "numpy")  # marks the module's own names, in place

print(statistics.fmean([1.0, 2.0, 4.0]), coheriq.explain(statistics.fmean).engine)
print(fmean is statistics.fmean, fmean([1.0, 2.0, 4.0]))
print(coheriq.explain(statistics.fmean))
