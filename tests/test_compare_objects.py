"""The comparison of Python state (sandbox/redline_worker/codec.py writes, evaluator/compare.py reads):
what real objects hold is compared, sharing and cycles as structure, and what cannot be described is
redline's limit, never "equal". The worker's encoder is called here in the test process, as the
worker calls it; tests/test_real_objects.py runs the same rules through the CLI."""

from __future__ import annotations

import array
import collections
import dataclasses
import datetime
import enum
import fractions
import json
import logging
import re
import threading
import weakref
from decimal import Decimal
from typing import Any

import pytest
from redline.evaluator.compare import Mismatch, Unsupported, compare
from redline.evaluator.gate import indistinct
from redline.evaluator.protocol import Reproduced
from redline.evaluator.sandbox.redline_worker.codec import encode
from redline.evaluator.sandbox.redline_worker.ops import fingerprint


def verdict(a: Any, b: Any, exact: bool = False) -> str:
    ref, got = json.loads(json.dumps(encode(a))), json.loads(json.dumps(encode(b)))  # as they travel
    try:
        compare(ref, got, "output", 0.0 if exact else None, 0.0 if exact else None)
    except Mismatch as exc:
        return f"differ: {exc}"
    except Unsupported as exc:
        return f"unsupported: {exc}"
    return "equal"


class Clock:
    __slots__ = ("hour", "minute")

    def __init__(self, hour: int, minute: int | None = None) -> None:
        self.hour = hour
        if minute is not None:
            self.minute = minute


class Base:
    __slots__ = ("__secret",)

    def __init__(self, v: int) -> None:
        self.__secret = v


class Derived(Base):
    __slots__ = ("extra",)

    def __init__(self, v: int, extra: int) -> None:
        super().__init__(v)
        self.extra = extra


class Colour(enum.Enum):
    RED = 1
    GREEN = 2


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float


class Tree:
    def __init__(self, label: str, parent: Tree | None = None) -> None:
        self.label, self.parent, self.children = label, parent, []
        if parent is not None:
            parent.children.append(self)


def test_state_in_slots_of_every_class_is_compared() -> None:
    assert verdict(Clock(12, 35), Clock(12, 35)) == "equal"
    assert verdict(Clock(12, 35), Clock(24, 35)) == "differ: output.hour is 24, the reference's 12"
    assert verdict(Clock(12), Clock(12, 0)).startswith("differ: output.minute")  # an empty slot is a value
    assert verdict(Derived(1, 2), Derived(1, 2)) == "equal"
    assert "output._Base__secret is 3" in verdict(Derived(1, 2), Derived(3, 2))  # a private slot of a base


def test_values_equal_by_what_they_denote() -> None:
    assert verdict(Colour.RED, Colour.RED) == "equal"
    assert verdict(Colour.RED, Colour.GREEN) == "differ: output is 'GREEN', the reference's 'RED'"
    assert verdict(re.compile(r"a+", re.I), re.compile(r"a+", re.I)) == "equal"
    assert verdict(re.compile(r"a+"), re.compile(r"a*")).startswith("differ")
    assert verdict(re.match("a(b)", "abc"), re.match("a(b)", "abd")) == "equal"
    assert verdict(re.match("a(b)", "abc"), re.match("a(.)", "acc")).startswith("differ")
    assert verdict(bytearray(b"xy"), bytearray(b"xy")) == "equal"
    assert verdict(bytearray(b"xy"), bytearray(b"xz")).startswith("differ")
    assert verdict(memoryview(b"xy"), memoryview(b"xy")) == "equal"
    assert verdict([Clock, len, json], [Clock, len, json]) == "equal"
    assert verdict(Clock, Tree).startswith("differ")
    assert verdict(logging.getLogger("a.b"), logging.getLogger("a.b")) == "equal"
    assert verdict(logging.getLogger("a.b"), logging.getLogger("a.c")).startswith("differ")
    assert verdict(float("nan"), float("nan")) == "equal"
    assert verdict([threading.Lock()], [threading.Lock()]) == "equal"


@pytest.mark.parametrize(("a", "b"), [
    (Decimal("1.5"), Decimal("1.50")),
    (datetime.datetime(2024, 1, 1, 12), datetime.datetime(2024, 1, 1, 13)),
    (fractions.Fraction(1, 3), fractions.Fraction(2, 3)),
    (collections.deque([1, 2]), collections.deque([2, 1])),
    (collections.deque([1], maxlen=3), collections.deque([1], maxlen=4)),
    (collections.defaultdict(list, a=[1]), collections.defaultdict(set, a=[1])),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1)),
    (collections.Counter("aab"), collections.Counter("abb")),
    (array.array("i", [1, 2]), array.array("i", [1, 3])),
    (collections.namedtuple("P", "x y")(1, 2), collections.namedtuple("P", "x y")(1, 3)),
    (Point(1.0, 2.0), Point(1.0, 2.5)),
])
def test_state_by_the_reduce_protocol(a: Any, b: Any) -> None:
    assert verdict(a, a) == "equal"
    assert verdict(a, b).startswith("differ"), verdict(a, b)


def test_sharing_and_cycles_are_compared_as_structure() -> None:
    row = [1]
    assert verdict([row, row], [row, row]) == "equal"
    assert "not the object at output[0]" in verdict([row, row], [[1], [1]])
    assert "is the object at output[0]" in verdict([[1], [1]], [row, row])
    loop: list[Any] = [1]
    loop.append(loop)
    other: list[Any] = [1]
    other.append(other)
    assert verdict(loop, other) == "equal"
    assert verdict(loop, [1, [1, loop]]).startswith("differ")
    t1, t2 = Tree("root"), Tree("root")
    Tree("a", t1), Tree("a", t2)
    assert verdict(t1, t2) == "equal"
    Tree("b", Tree("x", t1)), Tree("b", t2)
    Tree("x", t2)
    assert verdict(t1, t2).startswith("differ")  # same labels, another parent for "b"
    assert verdict([weakref.ref(t1)], [weakref.ref(t1)]) == "equal"


class Kind(tuple):
    """pygments' token types: a tuple whose instances hold their parent and a set of their subtypes."""

    parent: Any = None

    def __init__(self, *args: Any) -> None:
        self.subtypes: set[Kind] = set()

    def child(self, name: str) -> Kind:
        new = Kind((*self, name))
        new.parent = self
        self.subtypes.add(new)
        return new


def kinds(*leaf_names: str) -> Kind:
    root = Kind()
    for name in ("Name", "Number", "Text"):
        node = root.child(name)
        for leaf in leaf_names:
            node.child(leaf)
    return root


def test_sets_in_a_tree_linked_both_ways_are_compared_once_each() -> None:
    """A set's members are encoded as graphs of their own (their order is their JSON's); a member's link
    back to the object whose set holds it refers to that object in the enclosing graph. Encoded in place
    again, pygments' token types (each holding its parent and a set of its children) were walked until
    the encoder's budget ran out, for every token of a lexer's output: the reference timed out."""
    a, b = kinds("Builtin", "Class", "Function"), kinds("Builtin", "Class", "Function")
    tokens = [(i, kind, "x") for i, kind in enumerate(sorted(a.subtypes) * 50)]
    assert verdict(tokens, [(i, kind, "x") for i, kind in enumerate(sorted(b.subtypes) * 50)]) == "equal"
    # Each token type's graph once: the 150 tokens' encoding stays small (it grew to the encoder's budget).
    assert len(json.dumps(encode(tokens))) < 40_000
    assert verdict(a, kinds("Builtin", "Class", "Other")).startswith("differ")
    moved = kinds("Builtin", "Class", "Function")
    leaf = next(iter(next(iter(moved.subtypes)).subtypes))
    leaf.parent = moved  # the same labels, a link to another object
    assert verdict(a, moved).startswith("differ")
    # One member whose link back points at another object the enclosing graph holds: compared by place.
    x1, y1, x2, y2 = Kind(("x",)), Kind(("y",)), Kind(("x",)), Kind(("y",))
    x1.child("c"), x2.child("c")
    next(iter(x2.subtypes)).parent = y2
    assert verdict([x1, y1], [x1, y1]) == "equal"
    assert "refers to another object than the reference's does" in verdict([x1, y1], [x2, y2])


def test_ten_thousand_links_without_recursion_and_the_path_shortened() -> None:
    def chain(n: int, last: int) -> dict[str, Any]:
        head: dict[str, Any] = {"v": 0}
        node = head
        for i in range(1, n):
            node["next"] = node = {"v": i if i < n - 1 else last, "prev": node}
        return head
    assert verdict(chain(10_000, 9_999), chain(10_000, 9_999)) == "equal"
    why = verdict(chain(10_000, 9_999), chain(10_000, -1))
    assert why.startswith("differ: output['next']") and "steps)…" in why and why.endswith("is -1, the reference's 9999")


def test_long_sequences_are_sampled_with_exact_lengths() -> None:
    long = list(range(200_000))
    assert verdict(long, list(long)) == "equal"
    assert verdict(long, long[:-1]).startswith("differ: output has 199999 items")
    node = encode(long)["nodes"][0]
    assert node["n"] == 200_000 and len(node["v"]) == 65_536  # sampled, at positions both sides share


def test_what_cannot_be_described_is_unsupported_never_equal() -> None:
    def gen() -> Any:
        yield 1
    why = verdict({"items": gen()}, {"items": gen()})
    assert why.startswith("unsupported: output['items']: the reference's value of type builtins.generator"), why


def test_dicts_compare_keys_exactly_and_floats_within_tolerance() -> None:
    assert verdict({"a": 1.0}, {"a": 1.0 + 1e-12}) == "equal"
    assert verdict({"a": 1.0}, {"a": 1.0 + 1e-12}, exact=True).startswith("differ")
    assert verdict({1.0: "x"}, {1.0 + 1e-12: "x"}).startswith("differ: output key")
    assert verdict({"a": 1, "b": 2}, {"b": 2, "a": 1}).startswith("differ")  # insertion order is observable
    assert verdict({3, 1, 2}, {2, 3, 1}) == "equal"


def test_attribute_order_does_not_change_the_fingerprint_and_different_values_do() -> None:
    class Plain:
        pass
    a, b = Plain(), Plain()
    a.x, a.y = 1, 2
    b.y, b.x = 2, 1
    assert fingerprint(a) == fingerprint(b)
    s1, s2 = set(), set()
    s1.update([1, 9])
    s2.update([9, 1])
    assert list(s1) != list(s2) and fingerprint(s1) == fingerprint(s2)
    assert fingerprint(Clock(1, 2)) != fingerprint(Clock(1, 3))


def test_outcomes_that_differ_but_encode_alike_are_reported_as_a_lossy_comparison() -> None:
    same = encode(Clock(12, 35))
    entries = [Reproduced(index=0, recorded=same, fingerprint="a"), Reproduced(index=1, recorded=same, fingerprint="a"),
               Reproduced(index=2, recorded=encode(Clock(1, 0)), fingerprint="b")]
    assert indistinct(entries) == ""
    entries.append(Reproduced(index=3, recorded=same, fingerprint="c"))
    why = indistinct(entries)
    assert why.startswith("captured calls 0 and 3 returned different values (of type ") and "Clock)" in why


class Sorted:
    """Pickles itself from its values alone (as sortedcontainers' SortedList does); `_maxes` is derived
    state that later calls read."""

    def __init__(self, values: list[int]) -> None:
        self._values = sorted(values)
        self._maxes = [self._values[-1]] if self._values else []

    def __reduce__(self) -> Any:
        return (type(self), (self._values,))


def test_a_class_written_in_python_is_compared_by_all_its_state_not_its_own_reduce() -> None:
    a, b = Sorted([3, 1]), Sorted([3, 1])
    assert verdict(a, b) == "equal"
    b._maxes = [1]  # wrong derived state: its own pickle would not show it
    assert verdict(a, b) == "differ: output._maxes[0] is 1, the reference's 3"
    b._maxes, b._extra = [3], True
    assert verdict(a, b) == "differ: output has attributes ['_extra'] that the reference's lacks"


def test_a_logger_is_compared_by_name_whatever_its_handlers_hold() -> None:
    """A logger reaches the process's logging manager and every handler in it (a stream that cannot be
    pickled, under pytest's capture): it is one object per name, compared by that name."""
    logger = logging.getLogger("redline.tests.handlers")
    handler = logging.StreamHandler(x for x in ())  # type: ignore[arg-type]  # a stream nothing can describe
    logger.addHandler(handler)
    try:
        assert verdict({"log": logger}, {"log": logging.getLogger("redline.tests.handlers")}) == "equal"
        assert verdict(logger, logging.getLogger("redline.tests.other")).startswith("differ")
    finally:
        logger.removeHandler(handler)
