"""A call through a proxy behaves exactly like a call of the implementation.

Hypothesis draws signatures (every parameter kind, defaults, names that clash
with coheriq's own) and calls (right and wrong), and compares the proxy with the
reference and with an engine, globally and inside a scope.
"""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

import coheriq as cq

NAMES = ["a", "b", "c", "x", "args", "kwargs", "self", "cls", "name", "_coheriq_scoped"]
_domains = itertools.count()


@st.composite
def signatures(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=0, max_size=5, unique=True))
    kinds = draw(
        st.lists(
            st.sampled_from(["posonly", "pos", "kwonly"]), min_size=len(names), max_size=len(names)
        )
    )
    order = {"posonly": 0, "pos": 1, "kwonly": 2}
    params = sorted(zip(kinds, names, strict=True), key=lambda p: order[p[0]])
    positional = [n for k, n in params if k != "kwonly"]
    defaulted = draw(st.integers(0, len(positional)))
    defaults = set(positional[len(positional) - defaulted :])
    defaults |= {n for k, n in params if k == "kwonly" and draw(st.booleans())}
    varargs = draw(st.booleans()) and "va"
    varkw = draw(st.booleans()) and "vk"
    return params, defaults, varargs, varkw


def source(tag, signature, *, method):
    params, defaults, varargs, varkw = signature
    parts = ["this"] if method else []  # "this": a name the drawn ones never use
    for i, (kind, name) in enumerate(params):
        if kind == "kwonly" and (i == 0 or params[i - 1][0] != "kwonly") and not varargs:
            parts.append("*")
        if kind == "kwonly" and (i == 0 or params[i - 1][0] != "kwonly") and varargs:
            parts.append(f"*{varargs}")
        parts.append(f"{name}={len(name)}" if name in defaults else name)
        if kind == "posonly" and (i + 1 == len(params) or params[i + 1][0] != "posonly"):
            parts.append("/")
    if varargs and not any(k == "kwonly" for k, _ in params):
        parts.append(f"*{varargs}")
    if varkw:
        parts.append(f"**{varkw}")
    values = [name for _, name in params] + [v for v in (varargs, varkw) if v]
    returned = ", ".join([repr(tag), *values])
    return f"def f({', '.join(parts)}):\n    return ({returned},)\n"


def define(tag, signature, *, method=False):
    namespace = {}
    exec(source(tag, signature, method=method), namespace)
    return namespace["f"]


def outcome(call, args, kwargs):
    try:
        return call(*args, **kwargs)[1:]
    except TypeError:
        return TypeError


calls = st.tuples(
    st.lists(st.integers(0, 9), max_size=6),
    st.dictionaries(st.sampled_from([*NAMES, "va", "vk", "zz"]), st.integers(0, 9), max_size=4),
)


def candidate_with_engine(signature):
    """A fresh domain whose candidate f has ``signature``, and an engine overriding it."""
    domain = cq.AccelerationDomain(f"props{next(_domains)}")
    reference = define("reference", signature)
    proxy = domain.acceleration_candidate(name="f")(reference)
    domain.materialize()
    base = cq.engine_class(domain)
    engine = type(base)(
        "Engine", (base,), {"f": define("engine", signature, method=True)}, name="e"
    )
    return domain, proxy, reference, engine().f


@settings(max_examples=150, deadline=None)
@given(signature=signatures(), call_list=st.lists(calls, min_size=1, max_size=5))
def test_proxy_calls_match_direct_calls(signature, call_list):
    domain, proxy, reference, method = candidate_with_engine(signature)
    for args, kwargs in call_list:  # the global choice: the reference
        assert outcome(proxy, args, kwargs) == outcome(reference, args, kwargs)
        with cq.using_engine(domain, "e"):
            assert outcome(proxy, args, kwargs) == outcome(method, args, kwargs)
            if outcome(method, args, kwargs) is not TypeError:
                assert proxy(*args, **kwargs)[0] == "engine"

    domain, proxy, reference, method = candidate_with_engine(signature)
    cq.enable_engine(domain, "e")
    for args, kwargs in call_list:  # the global choice: the engine
        assert outcome(proxy, args, kwargs) == outcome(method, args, kwargs)
        with cq.using_engine(domain, cq.REFERENCE):
            assert outcome(proxy, args, kwargs) == outcome(reference, args, kwargs)
