"""Choosing an engine in code: for a block, and for the whole program."""

import mylib

import coheriq

print("installed:", coheriq.available_engines("mylib"))

# For a block: only the code inside runs on "fast", in this thread or task.
with coheriq.using_engine("mylib", "fast"):
    print("in the block:", coheriq.active_implementation("mylib"), mylib.normalize([1.0, 3.0]))
    made_in_the_block = mylib.Histogram([0.1, 0.6])
print("after the block:", coheriq.active_implementation("mylib"))  # the default: nothing chosen

# For the whole program: once, before the library's first use (or MYLIB_ENGINE=fast).
coheriq.enable_engine("mylib", "fast")
print("global:", coheriq.active_implementation("mylib"))

# mean is not overridden by "fast": it runs the library's own code.
print(coheriq.coverage("mylib"))
print("mean:", mylib.mean([1.0, 2.0, 6.0]), "from", coheriq.resolve_impl(mylib.mean).__module__)

# An object made under one engine stays that engine's; every engine reads it.
with coheriq.using_engine("mylib", coheriq.REFERENCE):
    print("density on the reference:", mylib.density(made_in_the_block))
print("made by:", coheriq.engine_of(made_in_the_block))
