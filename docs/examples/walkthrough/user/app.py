"""A program that uses mylib: it runs on whatever engine it is given."""

import mylib
from mylib import normalize  # imported before any engine is chosen: it follows anyway

import coheriq

histogram = mylib.Histogram([0.1, 0.3, 0.35, 0.9])
print("engine:", coheriq.active_implementation("mylib"))
print("normalize:", normalize([1.0, 3.0]))
print("density:", mylib.density(histogram))
print("made by:", coheriq.engine_of(histogram))
