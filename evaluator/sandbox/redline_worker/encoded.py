"""The encoded value: what the worker's codec.encode makes of a returned value (or of inputs after a
call) and what the harness's compare.py reads. Standard library only: both sides import it.

An encoded value is a graph, flat so that no depth of nesting can exhaust a recursion limit:
`{"nodes": [node, ...]}`, the value itself being node 0. Inside a node, a child is either an integer,
the index of another node, or an atom written in place (a dict). Every object other than an atom is
one node, however often it is reached: shared references and cycles point at the same index, so two
graphs are compared as structures, aliasing included. Each node has `t`, the object's exact type
(`module.qualname`), and the fields of its kind:

- `atom`: `v`. None, bool, int and str as themselves; float as its repr; complex as the reprs of its
  real and imaginary parts; bytes, bytearray and memoryview in base64. Also the values equal by
  what they denote: an `Enum` member by its name; a class, function or module by its qualified
  name; a compiled regex by [pattern repr, flags]; a regex match by [span, groups' repr, pattern
  repr]; a lock by its type alone.
- `items` (list, tuple, set, frozenset): `v`, the children. A set's items are encoded each as a
  graph of its own, in a canonical order (the order of their JSON), so two equal sets encode alike.
  A sequence longer than LONG items keeps `n`, its exact length, and the items at `at`, positions
  drawn from the request's sample seed (the same on both sides).
- `mapping` (dict): `v`, [key, value] pairs of children in insertion order (`n` and `at` as above).
- `object`: an instance described by its own state: `attrs`, [name, child] pairs sorted by name
  (its `__dict__` and the `__slots__` of every class in its MRO), and for subclasses of list, tuple,
  set or dict also `v` with their items or pairs as above.
- `reduce`: an instance described by the reduce protocol, as pickle and copy.deepcopy see it:
  `reduce`, the qualified name of the callable that rebuilds it, and the children `args`, `state`,
  `listitems`, `dictitems` where present (datetime, Decimal, Fraction, deque, defaultdict,
  OrderedDict, array, C types with `__reduce__`).
- `array` (NumPy arrays and scalars, torch tensors): `dtype` (NumPy's dtype string of the bytes),
  `shape`, and the bytes as base64 `b`, or as a blob file in the worker's scratch (`file` and its
  `sha256`), or only their `sha256` (a digest: enough to tell whether an input changed). Tensors add
  `torch_dtype`; half-precision and float8 tensors travel as float32 bytes. An array of more than
  4,194,304 elements travels as `sampled`: its bytes are elements at positions drawn from the
  request's sample seed, and `sampled` holds that seed, the element count, float64 sums of the values
  and of their magnitudes over every element, and NaN and infinity counts.
- `objects` (NumPy arrays of Python objects): `object: true`, `shape`, and `v`, the children.
- `back`: inside a set member's own graph, an object that an enclosing graph already holds (a
  child's link to the parent whose set of children holds it): `back`, [how many graphs up, its index
  there]. Two such references are the same where they point at the same place.
- `unsupported`: `unsupported`, why redline cannot describe the value (it cannot be pickled and
  holds no state of its own, or the graph is larger than the encoder's budget). A comparison that
  meets one stops as redline's limit, never as a difference.

Nodes whose identity matters (mutable objects: lists, dicts, sets, bytearrays, arrays, instances)
carry `m: 1`; the comparison requires their sharing to be the same on both sides.
"""

from __future__ import annotations

from typing import Any, Literal

Kind = Literal["atom", "items", "mapping", "object", "reduce", "array", "objects", "back", "unsupported"]
ITEMS = ("builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset")
SETS = ("builtins.set", "builtins.frozenset")
MAPPING = "builtins.dict"
LONG = 1 << 16  # sequences and dicts longer than this are compared at this many sampled positions


def kind(e: dict[str, Any]) -> Kind:
    """Which kind of node `e` is (see above)."""
    if "unsupported" in e:
        return "unsupported"
    if "reduce" in e:
        return "reduce"
    if "back" in e:
        return "back"
    if "attrs" in e:
        return "object"
    if e.get("object"):
        return "objects"
    if "b" in e or "file" in e or "sha256" in e:
        return "array"
    if e["t"] in ITEMS and "v" in e:
        return "items"
    if e["t"] == MAPPING:
        return "mapping"
    return "atom"


def is_graph(e: Any) -> bool:
    """Whether `e` is a whole encoded value (a graph of nodes)."""
    return isinstance(e, dict) and isinstance(e.get("nodes"), list) and len(e["nodes"]) > 0
