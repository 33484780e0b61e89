"""The encoded value: what the worker's codec.encode makes of a returned value (or of inputs after a
call) and what the harness's compare.py reads. Standard library only: both sides import it.

An encoded value is a JSON object with `t`, the value's exact type (`module.qualname`), and the
fields of its kind:

- `scalar`: `v`. None, bool, int and str as themselves; float as its repr; complex as the reprs of
  its real and imaginary parts; bytes in base64.
- `items` (list, tuple, set, frozenset): `v`, the encoded items; a set's in a canonical order.
- `mapping` (dict): `v`, the [key, value] pairs, both encoded, in insertion order.
- `array` (NumPy arrays and scalars, torch tensors): `dtype` (NumPy's dtype string of the bytes),
  `shape`, and the bytes as base64 `b`, or as a blob file in the worker's scratch (`file` and its
  `sha256`), or only their `sha256` (a digest: enough to tell whether an input changed). Tensors add
  `torch_dtype`; half-precision and float8 tensors travel as float32 bytes. An array of more than
  4,194,304 elements travels as `sampled`: its bytes are elements at positions drawn from the
  request's sample seed, and `sampled` holds that seed, the element count, float64 sums of the values
  and of their magnitudes over every element, and NaN and infinity counts.
- `objects` (NumPy arrays of Python objects): `object: true`, `shape`, and `v`, the encoded elements.
- `attrs` (plain objects): `attrs`, the encoded dict of their attributes.
- `opaque`: `opaque: true`; only the type can be compared.
"""

from __future__ import annotations

from typing import Any, Literal

Kind = Literal["scalar", "items", "mapping", "array", "objects", "attrs", "opaque"]
ITEMS = ("builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset")
MAPPING = "builtins.dict"


def kind(e: dict[str, Any]) -> Kind:
    """Which kind of encoded value `e` is (see above)."""
    if "attrs" in e:
        return "attrs"
    if e.get("opaque"):
        return "opaque"
    if e["t"] in ITEMS:
        return "items"
    if e["t"] == MAPPING:
        return "mapping"
    if "b" in e or "file" in e or "sha256" in e:
        return "array"
    if e.get("object"):
        return "objects"
    return "scalar"
