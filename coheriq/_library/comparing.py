"""How a verification compares two implementations' values: a domain's rules, and the default.

:class:`Comparisons` holds what ``register_comparison`` registered (per type, or per candidate's
results); :meth:`Comparisons.difference` applies it, else compares numbers within a tolerance,
containers item by item, and anything else with ``==``. Imported only where a library or a
verification asks."""

from __future__ import annotations

import copy
import functools
import math
import numbers
import reprlib

from .._stdlib import TYPE_CHECKING
from ..exceptions import CoheriqTypeError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    _Pairs = Iterable[tuple[str, Any, Any]]  # (where, mine, other)

DEFAULT_RTOL = 1e-9
"""The relative tolerance for numbers where neither the library nor the user sets one."""

_MAX_DEPTH = 64  # nested containers deeper than this are compared with == as a whole
_SCALARS = frozenset({int, float, complex, bool, str, bytes, type(None)})


class SharedSource(Exception):  # noqa: N818 - a reason not to copy, not a failure
    """An argument is an iterator (of type name ``kind``) whose copy may read the program's source
    (``deepcopy`` shares what it cannot copy: the other side would take the program's items)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class ComparisonRule:
    """How values of one type, or the results of one candidate (``target``, its name), compare:
    the options of :meth:`~coheriq.AccelerationDomain.register_comparison`."""

    __slots__ = ("atol", "compare", "convert", "copy", "rtol", "target")

    def __init__(
        self,
        target: type | str,
        convert: Callable[[Any], Any] | None,
        compare: Callable[[Any, Any], bool | str] | None,
        copy: Callable[[Any], Any] | None,
        rtol: float | None,
        atol: float | None,
    ) -> None:
        self.target, self.convert, self.compare, self.copy = target, convert, compare, copy
        self.rtol, self.atol = rtol, atol


class Comparisons:
    """A domain's comparison rules and the candidates it runs once only (side effects)."""

    def __init__(self, domain_name: str) -> None:
        self.domain_name = domain_name
        self._by_type: list[ComparisonRule] = []  # newest first: a later rule wins
        self._by_candidate: dict[str, ComparisonRule] = {}
        self._scalar_rules: dict[type, ComparisonRule | None] = {}  # see rule_for
        self.side_effects: set[str] = set()

    def register(self, rule: ComparisonRule) -> None:
        """Add ``rule``; one for the same target replaces the earlier one."""
        if isinstance(rule.target, str):
            if rule.copy is not None:
                raise CoheriqTypeError(
                    f"Domain {self.domain_name!r}: copy= is given per type, for the arguments "
                    f"of that type, not for candidate {rule.target!r}; register the copy for "
                    "the type of the argument that needs it."
                )
            self._by_candidate[rule.target] = rule
            return
        self._by_type = [r for r in self._by_type if r.target is not rule.target]
        self._by_type.insert(0, rule)
        self._scalar_rules = {}

    def rule_for(self, value: Any) -> ComparisonRule | None:
        """The newest rule whose type ``value`` is an instance of, if any."""
        kind = type(value)
        scalar = kind in _SCALARS
        if scalar and kind in self._scalar_rules:
            return self._scalar_rules[kind]
        found = next((r for r in self._by_type if isinstance(value, r.target)), None)  # type: ignore[arg-type]
        if scalar:
            # Remembered: a result holds many numbers, and an isinstance check
            # against a marked class asks every engine's class.
            self._scalar_rules[kind] = found
        return found

    def copy_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """Copies of ``args`` and ``kwargs`` that share nothing mutable with them: by a type's
        ``copy`` rule (also inside tuples, lists and dicts), else :func:`copy.deepcopy`. Raises
        :class:`SharedSource` for an iterator, anywhere, that neither has a ``copy`` rule nor is
        known to copy apart (:func:`_copies_apart`); what copying raised propagates."""
        memo: dict[int, Any] = {}

        def own(value: Any) -> Any:
            # One copy per object, so that arguments that alias each other (f(a, a),
            # [b, b]) alias in the copy too, and a list that holds itself is copied.
            key = id(value)
            if key in memo:
                return memo[key]
            rule = self.rule_for(value) if self._by_type else None
            if rule is not None and rule.copy is not None:
                copied = memo[key] = rule.copy(value)
            elif type(value) is list:
                copied = memo[key] = []
                copied.extend(own(item) for item in value)
            elif type(value) is dict:
                copied = memo[key] = {}
                copied.update((k, own(item)) for k, item in value.items())
            elif type(value) is tuple:
                copied = memo[key] = tuple(own(item) for item in value)
            else:
                _refuse_shared(value)  # before deepcopy, which fails on a generator
                # deepcopy keeps every object it copied in memo[id(memo)]: the
                # iterators among those it copied now must copy apart too.
                kept = memo.setdefault(id(memo), [])
                start = len(kept)
                copied = copy.deepcopy(value, memo)
                for original in kept[start:]:
                    _refuse_shared(original)
                return copied
            memo.setdefault(id(memo), []).append(value)  # keep it alive, as deepcopy does
            return copied

        return tuple(own(a) for a in args), {k: own(v) for k, v in kwargs.items()}

    def difference(
        self,
        candidate: str,
        mine: Any,
        other: Any,
        *,
        rtol: float | None = None,
        atol: float | None = None,
        skipped: list[str] | None = None,
    ) -> str | None:
        """Where ``mine`` (the engine's result) and ``other`` differ, as a sentence; else None.

        Tolerances: a candidate's rule, else a type's rule, else ``rtol`` and ``atol`` as given,
        else :data:`DEFAULT_RTOL` and 0. Two objects of one kind that compare by identity only
        are not compared: their type's name is added to ``skipped``. What a rule, or reading a
        value, raised propagates."""
        rule = self._by_candidate.get(candidate)
        tolerances = (
            _first(rule.rtol if rule else None, rtol, DEFAULT_RTOL),
            _first(rule.atol if rule else None, atol, 0.0),
        )
        if rule is not None:
            if rule.convert is not None:
                mine, other = rule.convert(mine), rule.convert(other)
            if rule.compare is not None:
                return _verdict(rule.compare(mine, other), "result", mine, other)
        return self._differ(mine, other, "result", tolerances, 0, skipped)

    def arguments_difference(
        self,
        mine: tuple[tuple[Any, ...], dict[str, Any]],
        theirs: tuple[tuple[Any, ...], dict[str, Any]],
        *,
        rtol: float | None = None,
        atol: float | None = None,
    ) -> str | None:
        """Where two sides' arguments differ after the call (a function that works in place),
        compared as :meth:`difference` compares results."""
        tolerances = (_first(rtol, DEFAULT_RTOL), _first(atol, 0.0))
        pairs = [
            (f"argument {i} after the call", a, b)
            for i, (a, b) in enumerate(zip(mine[0], theirs[0], strict=True))
        ]
        pairs += [
            (f"argument {k!r} after the call", v, theirs[1].get(k)) for k, v in mine[1].items()
        ]
        return self._pairs_differ(pairs, tolerances, 0, None)

    def _differ(
        self,
        mine: Any,
        other: Any,
        where: str,
        tolerances: tuple[float, float],
        depth: int,
        skipped: list[str] | None,
    ) -> str | None:
        mine_rule, other_rule = self.rule_for(mine), self.rule_for(other)
        for rule in (mine_rule, other_rule):
            if rule is not None:
                tolerances = (_first(rule.rtol, tolerances[0]), _first(rule.atol, tolerances[1]))
        if mine_rule is not None and mine_rule.convert is not None:
            mine = mine_rule.convert(mine)
        if other_rule is not None and other_rule.convert is not None:
            other = other_rule.convert(other)
        rule = mine_rule or other_rule
        if rule is not None and rule.compare is not None:
            return _verdict(rule.compare(mine, other), where, mine, other)
        if isinstance(mine, range) and isinstance(other, range):
            return _equality(mine, other, where)  # by start, stop and step: no items made
        if depth < _MAX_DEPTH:
            if _is_number(mine) and _is_number(other):
                return _numbers_differ(mine, other, where, *tolerances)
            mine_items, other_items = _items(mine), _items(other)
            if mine_items is not None and other_items is not None:
                shape, pairs = _item_pairs(mine_items, other_items, where)
                return shape or self._pairs_differ(pairs, tolerances, depth + 1, skipped)
        if mine is not other and _identity_only_alike(mine, other):
            # Two sides' such objects are never equal: said, not counted as a
            # difference. One against anything else (None against a number: a
            # forgotten return) is compared, and differs.
            if skipped is not None:
                skipped.append(type(mine).__qualname__)
            return None
        return _equality(mine, other, where)

    def _pairs_differ(
        self,
        pairs: _Pairs,
        tolerances: tuple[float, float],
        depth: int,
        skipped: list[str] | None,
    ) -> str | None:
        """The first difference among ``(where, mine, other)`` pairs, or None."""
        found = (self._differ(a, b, where, tolerances, depth, skipped) for where, a, b in pairs)
        return next(filter(None, found), None)


_APART: dict[type, bool] = {}  # type -> whether its copy reads apart (a cache of what follows)


def _refuse_shared(value: Any) -> None:
    """Raise :class:`SharedSource` where ``value`` is an iterator not known to copy apart."""
    kind = type(value)
    apart = _APART.get(kind)
    if apart is None:
        if len(_APART) >= 1024:
            _APART.clear()  # types made on the fly are not kept alive for ever
        iterator = hasattr(kind, "__next__") or hasattr(kind, "__anext__")
        apart = _APART[kind] = not iterator or kind in _copies_apart()
    if not apart:
        raise SharedSource(kind.__name__)


@functools.cache
def _copies_apart() -> frozenset[type]:
    """The iterator types whose deepcopy reads apart from the original (an allow-list): each
    holds its source (a container, a range, other iterators, copied and checked in turn) and
    its position; ``map`` and ``filter`` share only their function."""
    import array
    import collections
    import itertools

    row: dict[int, int] = {}
    # The built-in containers' iterators, made to read their types.
    samples: tuple[Any, ...] = (iter([]), reversed([]), iter(()), iter(range(0)))
    samples += (iter(range(2**64)), iter(array.array("b")))
    samples += (iter(""), iter("\u00e9"), iter(b""), iter(bytearray()), iter(set()))
    samples += (iter(row), iter(row.values()), iter(row.items()), reversed(row))
    samples += (reversed(row.values()), reversed(row.items()))
    samples += (iter(collections.deque()), reversed(collections.deque()))
    named = (
        "count repeat cycle islice chain accumulate compress dropwhile takewhile "
        "starmap zip_longest filterfalse product permutations combinations "
        "combinations_with_replacement"
    )
    types = {type(sample) for sample in samples} | {enumerate, zip, map, filter, reversed}
    return frozenset(types | {getattr(itertools, n) for n in named.split()})


def _first(*values: float | None) -> float:
    """The first of ``values`` that is not None (the last one always is a number)."""
    return next(v for v in values if v is not None)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _numbers_differ(mine: Any, other: Any, where: str, rtol: float, atol: float) -> str | None:
    if isinstance(mine, numbers.Integral) and isinstance(other, numbers.Integral):
        return None if mine == other else f"{where}: {mine!r} against {other!r}"
    try:
        a, b = complex(mine), complex(other)
    except (TypeError, ValueError, OverflowError):
        return _equality(mine, other, where)
    nan_a, nan_b = math.isnan(abs(a)), math.isnan(abs(b))
    if (nan_a and nan_b) or a == b:  # two NaNs, infinities of one sign, exact equality
        return None
    if nan_a or nan_b or math.isinf(abs(a)) or math.isinf(abs(b)):
        # A NaN equals only a NaN; an infinity only itself: within a tolerance of
        # it, everything is (the gap and the allowance are both infinite).
        return f"{where}: {mine!r} against {other!r}"
    gap = abs(a - b)
    if gap <= max(rtol * max(abs(a), abs(b)), atol):
        return None
    relative = gap / max(abs(a), abs(b))
    return (
        f"{where}: {mine!r} against {other!r} (relative difference {relative:.3g}, "
        f"tolerance {rtol:.3g}" + (f", absolute {atol:.3g})" if atol else ")")
    )


def relative_difference(difference: str) -> float | None:
    """The relative difference a sentence of :func:`_numbers_differ` states, or None
    (a difference between other values than numbers)."""
    import re  # only for a mismatch found

    found = re.search(r"\(relative difference ([^,)]+)", difference)
    try:
        return None if found is None else float(found.group(1))
    except ValueError:
        return None


def _items(value: Any) -> Sequence[Any] | dict[Any, Any] | None:
    """``value``'s items to compare one by one, where it is a container (a ``range`` itself,
    not a list of it); else None."""
    if isinstance(value, (str, bytes, bytearray)):
        return None
    if isinstance(value, (list, tuple, range, dict)):
        return value
    tolist = getattr(value, "tolist", None)  # NumPy, JAX, array.array
    if callable(tolist):
        try:
            items = tolist()
        except Exception:
            return None
        return items if isinstance(items, (list, dict)) else [items]
    return None


def _item_pairs(mine: Any, other: Any, where: str) -> tuple[str | None, _Pairs]:
    """How two containers' shapes differ, or None and their items paired by key or index."""
    if isinstance(mine, dict) != isinstance(other, dict):
        return f"{where}: a mapping on one side and a sequence on the other", ()
    if isinstance(mine, dict):
        if mine.keys() != other.keys():
            only = sorted(map(repr, mine.keys() ^ other.keys()))[:5]
            return f"{where}: the keys differ ({', '.join(only)} on one side only)", ()
        return None, ((f"{where}[{key!r}]", mine[key], other[key]) for key in mine)
    if len(mine) != len(other):
        return f"{where}: {len(mine)} items, against {len(other)}", ()
    pairs = enumerate(zip(mine, other))  # noqa: B905 -- lengths checked
    return None, ((f"{where}[{index}]", a, b) for index, (a, b) in pairs)


def _identity_only_alike(mine: Any, other: Any) -> bool:
    """Whether both compare by identity only (no ``__eq__`` of their own) and are of one kind:
    one type, or a class and its subclass, other than :class:`object` itself."""
    kind, other_kind = type(mine), type(other)
    by_identity: object = object.__eq__
    if kind.__eq__ is not by_identity or other_kind.__eq__ is not by_identity:
        return False
    if kind is other_kind:
        return True
    return object not in (kind, other_kind) and (
        issubclass(kind, other_kind) or issubclass(other_kind, kind)
    )


def _agree(answer: Any, depth: int = 0) -> bool:
    """Whether ``answer``, what ``==`` returned, says that two values are equal: a bool as it
    is; an elementwise answer where all its items are true; one whose truth is ambiguous (NumPy
    style) where its ``all()`` is (else what taking its truth raised propagates)."""
    if answer is True or answer is False:
        return answer
    items = _items(answer) if depth < _MAX_DEPTH else None
    if items is not None:
        values = items.values() if isinstance(items, dict) else items
        return all(_agree(item, depth + 1) for item in values)
    try:
        return bool(answer)
    except Exception:
        reduce = getattr(answer, "all", None)
        if depth >= _MAX_DEPTH or not callable(reduce):
            raise
        return _agree(reduce(), depth + 1)


def _equality(mine: Any, other: Any, where: str) -> str | None:
    try:
        same = _agree(mine == other)
    except Exception as error:
        return (
            f"{where}: {_short(mine)} and {_short(other)} cannot be compared with == "
            f"({type(error).__name__}: {error}); register a comparison for their type"
        )
    return None if same else f"{where}: {_short(mine)} against {_short(other)}"


def _verdict(outcome: object, where: str, mine: Any, other: Any) -> str | None:
    """What a library's ``compare`` returned, as a difference (None where they agree)."""
    if type(outcome).__name__ in ("bool_", "bool"):  # NumPy's bool too: (a == b).all()
        outcome = bool(outcome)
    if outcome is True:
        return None
    if outcome is False:
        return f"{where}: {_short(mine)} against {_short(other)}"
    if isinstance(outcome, str) and outcome:
        return f"{where}: {outcome}"
    raise CoheriqTypeError(
        "A comparison registered with register_comparison returned "
        f"{type(outcome).__name__} ({outcome!r}); it must return True where the two "
        "values agree, and False or a sentence saying how they differ where not."
    )


def _short(value: Any, width: int = 80) -> str:
    """``repr(value)``, cut to ``width`` characters."""
    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = width
    shortened.maxlist = shortened.maxtuple = 8
    text = shortened.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def summarize(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The arguments of a call, each cut short, as they would be written in the call."""
    parts = [_short(a, 60) for a in args] + [f"{k}={_short(v, 60)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"
