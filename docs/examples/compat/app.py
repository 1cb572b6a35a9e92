"""A program written for coheriq 0.0.x, unchanged."""

import tinystats

import coheriq

engines = coheriq.available_engines("tinystats")
print("installed:", engines)
if engines == ("fast",):
    coheriq.enable_engine("tinystats", "fast")

print("mean:", tinystats.mean([1.0, 2.0, 4.0]))
print("normalize:", tinystats.normalize([1.0, 3.0]))
print("running on:", coheriq.active_implementation("tinystats"))

try:
    coheriq.enable_engine("tinystats", coheriq.REFERENCE)
except coheriq.CoheriqDomainError:
    print("the engine is chosen once per process")
