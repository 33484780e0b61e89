"""Library idioms: torch code written out by hand (attention, norms, activations, softmax, losses,
a matmul plus bias) rewritten to the fused library call that computes the same thing.

How a function is read: its straight-line statements are followed in order, each name's value is
inlined where it is used (so `s = q @ k.mT; p = s.softmax(-1); y = p @ v` is seen as one
expression), and every expression is brought to a canonical form (torch functions, `F.`/`torch.`
functions and tensor methods alike; keywords placed by position; products and sums flattened and
ordered; `a / b` as `a * b⁻¹`; constants folded), in which the patterns below are matched with
their metavariables (upper-case names) unified. A match replaces the statement's expression; the
assignments it consumed and nothing else uses any more are removed. Whether a rewrite is right
(numerics within tolerance, every shape) is the gate's to decide, like any candidate's.
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
import textwrap
from dataclasses import dataclass
from typing import Any, cast

Node = tuple[Any, ...]  # canonical form: ("call", name, args), ("mul", factors), ("add", terms), ...

# Parameters in order, with defaults, of the torch functions (and tensor methods) patterns use.
_SIG: dict[str, tuple[tuple[str, Any], ...]] = {
    "softmax": (("input", None), ("dim", None)),
    "log_softmax": (("input", None), ("dim", None)),
    "matmul": (("input", None), ("other", None)),
    "transpose": (("input", None), ("dim0", None), ("dim1", None)),
    "masked_fill": (("input", None), ("mask", None), ("value", None)),
    "mean": (("input", None), ("dim", None), ("keepdim", False)),
    "sum": (("input", None), ("dim", None), ("keepdim", False)),
    "amax": (("input", None), ("dim", None), ("keepdim", False)),
    "logsumexp": (("input", None), ("dim", None), ("keepdim", False)),
    "var": (("input", None), ("dim", None), ("unbiased", True), ("keepdim", False)),
    "gather": (("input", None), ("dim", None), ("index", None)),
    "unsqueeze": (("input", None), ("dim", None)),
    "squeeze": (("input", None), ("dim", None)),
    "pow": (("input", None), ("exponent", None)),
    "nll_loss": (("input", None), ("target", None)),
    **{f: (("input", None),) for f in ("exp", "log", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "softplus",
                                       "relu", "t", "tril", "neg")},
}
_TORCH_ROOTS = ("torch", "torch.nn.functional", "F", "nn.functional", "torch.special")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id.partition("@")[0]  # names carry a version tag while a function is read
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _fold(node: ast.AST) -> float | None:
    """The value of a constant expression (numbers, math's functions and constants, float('inf'))."""
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Call, ast.Name, ast.Attribute, ast.Load,
               ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(node)):
        return None
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and _dotted(n) not in ("math", "float", "int"):
            return None
        if isinstance(n, ast.Constant) and (isinstance(n.value, bool) or not isinstance(n.value, (int, float, str))):
            return None
        if isinstance(n, ast.Attribute) and _dotted(n).split(".")[0] != "math":
            return None
    plain = cast(ast.expr, copy.deepcopy(node))
    for n in ast.walk(plain):
        if isinstance(n, ast.Name):
            n.id = _dotted(n)
    try:
        value = eval(compile(ast.fix_missing_locations(ast.Expression(plain)), "<idiom>", "eval"),
                     {"__builtins__": {}, "math": math, "float": float, "int": int})
    except Exception:
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Canon:
    """The canonical form of expressions, remembering the expression each canonical node came from."""

    def __init__(self) -> None:
        self.orig: dict[int, ast.expr] = {}
        self._keep: list[Node] = []  # the nodes whose ids `orig` holds stay alive

    def of(self, node: ast.expr) -> Node:
        out = self._of(node)
        self.orig[id(out)] = node
        self._keep.append(out)
        return out

    def _of(self, node: ast.expr) -> Node:
        value = _fold(node)
        if value is not None:
            return ("const", value)
        if isinstance(node, ast.Constant):
            return ("lit", repr(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _neg(self.of(node.operand))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return ("call", "~", (self.of(node.operand),))
        if isinstance(node, ast.BinOp):
            a, b = self.of(node.left), self.of(node.right)
            if isinstance(node.op, ast.Mult):
                return _mul([a, b])
            if isinstance(node.op, ast.Div):
                return _mul([a, _recip(b)])
            if isinstance(node.op, ast.Add):
                return _add([a, b])
            if isinstance(node.op, ast.Sub):
                return _add([a, _neg(b)])
            if isinstance(node.op, ast.MatMult):
                return ("call", "matmul", (a, b))
            if isinstance(node.op, ast.Pow):
                return ("call", "pow", (a, b))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op = type(node.ops[0]).__name__
            return ("call", op, (self.of(node.left), self.of(node.comparators[0])))
        if isinstance(node, ast.Attribute) and node.attr in ("mT", "T"):
            inner = self.of(node.value)
            return ("call", "transpose", (inner, ("const", -2.0), ("const", -1.0))) if node.attr == "mT" \
                else ("call", "t", (inner,))
        if isinstance(node, ast.Attribute) and node.attr == "values" and isinstance(node.value, ast.Call):
            inner = self._of(node.value)
            if inner[0] == "call" and inner[1] == "max":
                return ("call", "amax", inner[2])
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and \
                isinstance(node.slice, ast.Constant) and node.slice.value == 0:
            inner = self._of(node.value)
            if inner[0] == "call" and inner[1] == "max":
                return ("call", "amax", inner[2])
        if isinstance(node, ast.Call):
            call = self._call(node)
            if call is not None:
                return call
        return ("leaf", ast.dump(node))

    def _call(self, node: ast.Call) -> Node | None:
        func = node.func
        args: list[ast.expr] = list(node.args)
        name = ""
        if isinstance(func, ast.Attribute):
            root = _dotted(func.value)
            if root in _TORCH_ROOTS:
                name = func.attr
            elif root == "math" and func.attr == "sqrt":
                name = "sqrt"
            elif func.attr in _SIG or func.attr in ("max", "size"):
                name, args = func.attr, [func.value, *args]
        if name == "max":  # x.max(dim, keepdim=...) is a (values, indices) pair: [0] / .values read it
            if len(args) < 2 and not node.keywords:
                return None
            name = "max"
            sig: tuple[tuple[str, Any], ...] = _SIG["amax"]
        elif name in _SIG:
            sig = _SIG[name]
        else:
            return None
        if any(isinstance(a, ast.Starred) for a in args) or len(args) > len(sig):
            return None
        placed: dict[str, ast.expr | None] = dict(zip([p for p, _ in sig], args, strict=False))
        for kw in node.keywords:
            key = "unbiased" if kw.arg == "correction" and name == "var" else kw.arg
            if key is None or key not in dict(sig) or key in placed:
                return None
            value = kw.value
            if kw.arg == "correction":
                corr = _fold(value)
                if corr is None:
                    return None
                value = ast.Constant(corr == 1.0)
            placed[key] = value
        out: list[Node] = []
        for param, default in sig:
            given = placed.get(param)
            if given is None:
                if default is None and param == "input":
                    return None
                out.append(("lit", repr(default)))
            else:
                c = self.of(given)
                out.append(("lit", repr(given.value)) if isinstance(given, ast.Constant) and
                           isinstance(given.value, bool) else c)
        if name == "transpose" and out[1] == ("const", -1.0) and out[2] == ("const", -2.0):
            out[1], out[2] = out[2], out[1]
        if name == "pow" and out[1] == ("const", 2.0):
            return ("call", "pow", tuple(out))
        if name == "log" and out[0][0] == "add" and ("const", 1.0) in out[0][1] and len(out[0][1]) == 2:
            rest = next(t for t in out[0][1] if t != ("const", 1.0))
            if rest[0] == "call" and rest[1] == "exp":
                return ("call", "softplus", (rest[2][0],))
        if name == "log" and out[0][0] == "call" and out[0][1] == "softmax":
            return ("call", "log_softmax", out[0][2])
        if name == "log1p" and out[0][0] == "call" and out[0][1] == "exp":
            return ("call", "softplus", (out[0][2][0],))
        return ("call", name, tuple(out))


def _neg(a: Node) -> Node:
    if a[0] == "const":
        return ("const", -a[1])
    if a[0] == "neg":
        return cast(Node, a[1])
    return ("neg", a)


def _recip(a: Node) -> Node:
    if a[0] == "const" and a[1] != 0:
        return ("const", 1.0 / a[1])
    if a[0] == "call" and a[1] == "sqrt":
        return ("call", "rsqrt", a[2])
    if a[0] == "add" and len(a[1]) == 2 and ("const", 1.0) in a[1]:  # 1 / (1 + exp(-x)) is sigmoid(x)
        rest = next(t for t in a[1] if t != ("const", 1.0))
        if rest[0] == "call" and rest[1] == "exp" and rest[2][0][0] == "neg":
            return ("call", "sigmoid", (rest[2][0][1],))
    return ("recip", a)


def _key(n: Node) -> str:
    return repr(n)


def _mul(parts: list[Node]) -> Node:
    flat: list[Node] = []
    for p in parts:
        flat += list(p[1]) if p[0] == "mul" else [p]
    const = math.prod(p[1] for p in flat if p[0] == "const")
    rest = [p for p in flat if p[0] != "const"]
    grouped: list[Node] = []
    for _k, same in itertools.groupby(sorted(rest, key=_key), key=_key):
        run = list(same)
        grouped.append(run[0] if len(run) == 1 else ("call", "pow", (run[0], ("const", float(len(run))))))
    if const != 1.0 or not grouped:
        grouped.append(("const", float(const)))
    return grouped[0] if len(grouped) == 1 else ("mul", tuple(sorted(grouped, key=_key)))


def _add(parts: list[Node]) -> Node:
    flat: list[Node] = []
    for p in parts:
        flat += list(p[1]) if p[0] == "add" else [p]
    const = sum(p[1] for p in flat if p[0] == "const")
    rest = [p for p in flat if p[0] != "const"]
    if const != 0.0 or not rest:
        rest.append(("const", float(const)))
    return rest[0] if len(rest) == 1 else ("add", tuple(sorted(rest, key=_key)))


def match(p: Node, s: Node, b: dict[str, Node]) -> dict[str, Node] | None:
    """Bindings under which pattern `p` is `s` (extending `b`), or None. Products and sums match
    whole, in any order of their terms."""
    if p[0] == "var":
        if p[1] in b:
            return b if b[p[1]] == s else None
        return {**b, p[1]: s}
    if p[0] != s[0]:
        return None
    if p[0] == "const":
        return b if math.isclose(p[1], s[1], rel_tol=1e-6, abs_tol=1e-12) or p[1] == s[1] else None
    if p[0] in ("mul", "add"):
        if len(p[1]) != len(s[1]):
            return None
        for perm in itertools.permutations(s[1]):
            got: dict[str, Node] | None = b
            for pi, si in zip(p[1], perm, strict=True):
                got = match(pi, si, got) if got is not None else None
            if got is not None:
                return got
        return None
    if p[0] == "call":
        if p[1] != s[1] or len(p[2]) != len(s[2]):
            return None
        for pi, si in zip(p[2], s[2], strict=True):
            got = match(pi, si, b)
            if got is None:
                return None
            b = got
        return b
    if p[0] in ("neg", "recip"):
        return match(p[1], s[1], b)
    return b if p == s else None


def _pattern(source: str) -> Node:
    """A pattern written as torch code; upper-case single names are metavariables."""
    return _vars(Canon().of(ast.parse(source, mode="eval").body))


def _vars(n: Node) -> Node:
    if n[0] == "leaf" and n[1].startswith("Name(id='") and n[1][9:10].isupper() and n[1].endswith("', ctx=Load())"):
        return ("var", n[1][9:-len("', ctx=Load())")])
    if n[0] in ("mul", "add"):
        return (n[0], tuple(_vars(x) for x in n[1]))
    if n[0] == "call":
        return ("call", n[1], tuple(_vars(x) for x in n[2]))
    if n[0] in ("neg", "recip"):
        return (n[0], _vars(n[1]))
    return n


@dataclass(frozen=True)
class Idiom:
    name: str  # what the report and the diff's approach say
    pattern: Node
    template: str  # the replacement, with the pattern's metavariables
    also: str = ""  # a second replacement offered as its own candidate (an assumption the gate checks)
    needs: tuple[tuple[str, str], ...] = ()  # (metavariable, text its source must contain)


def _idiom(name: str, pattern: str, template: str, also: str = "", needs: tuple[tuple[str, str], ...] = ()) -> Idiom:
    return Idiom(name, _pattern(pattern), template, also, needs)


_SDPA = "torch.nn.functional.scaled_dot_product_attention"
IDIOMS: list[Idiom] = [
    # Attention: softmax(q kᵀ · scale [masked]) v. A mask written as tril(ones(...)) is causal; any
    # other mask is carried over as attn_mask, with is_causal offered as a second candidate.
    _idiom("scaled_dot_product_attention (causal)",
           "torch.softmax((Q @ K.transpose(-2, -1) * S).masked_fill(torch.tril(O) == 0, float('-inf')), -1) @ V",
           f"{_SDPA}(Q, K, V, is_causal=True, scale=S)", needs=(("O", "ones("),)),
    _idiom("scaled_dot_product_attention (causal)",
           "torch.softmax((Q @ K.transpose(-2, -1)).masked_fill(torch.tril(O) == 0, float('-inf')), -1) @ V",
           f"{_SDPA}(Q, K, V, is_causal=True, scale=1.0)", needs=(("O", "ones("),)),
    _idiom("scaled_dot_product_attention (masked)",
           "torch.softmax((Q @ K.transpose(-2, -1) * S).masked_fill(M == 0, float('-inf')), -1) @ V",
           f"{_SDPA}(Q, K, V, attn_mask=M != 0, scale=S)", also=f"{_SDPA}(Q, K, V, is_causal=True, scale=S)"),
    _idiom("scaled_dot_product_attention (masked)",
           "torch.softmax((Q @ K.transpose(-2, -1) * S).masked_fill(M, float('-inf')), -1) @ V",
           f"{_SDPA}(Q, K, V, attn_mask=~M, scale=S)"),
    _idiom("scaled_dot_product_attention (masked)",
           "torch.softmax((Q @ K.transpose(-2, -1)).masked_fill(M == 0, float('-inf')), -1) @ V",
           f"{_SDPA}(Q, K, V, attn_mask=M != 0, scale=1.0)", also=f"{_SDPA}(Q, K, V, is_causal=True, scale=1.0)"),
    _idiom("scaled_dot_product_attention",
           "torch.softmax(Q @ K.transpose(-2, -1) * S, -1) @ V", f"{_SDPA}(Q, K, V, scale=S)"),
    _idiom("scaled_dot_product_attention",
           "torch.softmax(Q @ K.transpose(-2, -1), -1) @ V", f"{_SDPA}(Q, K, V, scale=1.0)"),
    # Norms over the last dimension.
    _idiom("layer_norm", "(X - X.mean(-1, keepdim=True)) / torch.sqrt(X.var(-1, keepdim=True, unbiased=False) + E)"
           " * W + B", "torch.nn.functional.layer_norm(X, X.shape[-1:], W, B, E)"),
    _idiom("layer_norm", "(X - X.mean(-1, keepdim=True)) / torch.sqrt(((X - X.mean(-1, keepdim=True)) ** 2)"
           ".mean(-1, keepdim=True) + E) * W + B", "torch.nn.functional.layer_norm(X, X.shape[-1:], W, B, E)"),
    _idiom("layer_norm", "(X - X.mean(-1, keepdim=True)) / torch.sqrt(X.var(-1, keepdim=True, unbiased=False) + E)",
           "torch.nn.functional.layer_norm(X, X.shape[-1:], eps=E)"),
    _idiom("layer_norm", "(X - X.mean(-1, keepdim=True)) / torch.sqrt(((X - X.mean(-1, keepdim=True)) ** 2)"
           ".mean(-1, keepdim=True) + E)", "torch.nn.functional.layer_norm(X, X.shape[-1:], eps=E)"),
    _idiom("rms_norm", "X * torch.rsqrt((X ** 2).mean(-1, keepdim=True) + E) * W",
           "torch.nn.functional.rms_norm(X, X.shape[-1:], W, E)"),
    _idiom("rms_norm", "X * torch.rsqrt((X ** 2).mean(-1, keepdim=True) + E)",
           "torch.nn.functional.rms_norm(X, X.shape[-1:], eps=E)"),
    # Activations.
    _idiom("gelu (tanh)", "0.5 * X * (1 + torch.tanh(math.sqrt(2 / math.pi) * (X + 0.044715 * X ** 3)))",
           "torch.nn.functional.gelu(X, approximate='tanh')"),
    _idiom("gelu", "0.5 * X * (1 + torch.erf(X / math.sqrt(2)))", "torch.nn.functional.gelu(X)"),
    _idiom("mish", "X * torch.tanh(torch.nn.functional.softplus(X))", "torch.nn.functional.mish(X)"),
    _idiom("silu", "X * torch.sigmoid(X)", "torch.nn.functional.silu(X)"),
    # Softmax and its log, cross-entropy.
    _idiom("softmax", "torch.exp(X - X.amax(D, keepdim=True)) / torch.exp(X - X.amax(D, keepdim=True))"
           ".sum(D, keepdim=True)", "torch.softmax(X, D)"),
    _idiom("softmax", "torch.exp(X) / torch.exp(X).sum(D, keepdim=True)", "torch.softmax(X, D)"),
    _idiom("log_softmax", "X - torch.logsumexp(X, D, keepdim=True)", "torch.log_softmax(X, D)"),
    _idiom("cross_entropy", "-torch.log_softmax(X, 1).gather(1, T.unsqueeze(1)).mean()",
           "torch.nn.functional.cross_entropy(X, T)"),
    _idiom("cross_entropy", "-torch.log_softmax(X, 1).gather(1, T.unsqueeze(1)).squeeze(1).mean()",
           "torch.nn.functional.cross_entropy(X, T)"),
    _idiom("cross_entropy", "torch.nn.functional.nll_loss(torch.log_softmax(X, 1), T)",
           "torch.nn.functional.cross_entropy(X, T)"),
    # A matmul and a bias: one GEMM with the bias in its epilogue.
    _idiom("linear", "X @ W.t() + B", "torch.nn.functional.linear(X, W, B)"),
    _idiom("linear", "X @ W + B", "torch.nn.functional.linear(X, W.mT, B)"),
]


@dataclass
class Rewrite:
    source: str  # the function's new source
    idioms: list[str]  # the idioms applied, in order


def rewrites(function_source: str) -> list[Rewrite]:
    """The function with every idiom it contains replaced by its library call; and, where an idiom has
    a second replacement resting on an assumption the code does not show (a mask that is causal),
    the same with that one. Empty when no idiom is found."""
    src = textwrap.dedent(function_source)
    first = _Function(src, alternative=False).rewrite()
    if first is None:
        return []
    out = [first]
    second = _Function(src, alternative=True).rewrite()
    if second is not None and second.source != first.source:
        out.append(second)
    return out


def _stored(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _simple(stmt: ast.stmt) -> str | None:
    """The name a plain `name = expression` statement assigns (None for any other statement)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
        return stmt.target.id
    return None


def _in_place(node: ast.AST) -> bool:
    """Whether an expression calls something that may change a tensor in place (`x.add_(1)`)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
               and not n.func.attr.startswith("_") for n in ast.walk(node))


class _Function:
    """One pass over a function's top-level statements (see the module's docstring)."""

    def __init__(self, src: str, alternative: bool) -> None:
        self.src, self.alternative = src, alternative
        fn = ast.parse(src).body[0]
        assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        self.fn = fn
        self.version: dict[str, int] = {}
        self.env: dict[str, ast.expr] = {}  # name -> its value with every known name inlined
        self.applied: list[str] = []

    def rewrite(self) -> Rewrite | None:
        changed: dict[int, ast.stmt] = {}
        for i, stmt in enumerate(self.fn.body):
            name = _simple(stmt)
            value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Return)) else None
            if value is not None and (name is not None or isinstance(stmt, ast.Return)):
                done = self._expression(value)
                if done is not None:
                    new = copy.copy(stmt)
                    new.value = done[0]  # type: ignore[attr-defined]
                    changed[i] = new
                if name is not None:
                    expanded = done[1] if done is not None else self._expand(value)
                    self.version[name] = self.version.get(name, 0) + 1
                    self.env = {} if _in_place(value) else self.env
                    self.env[name] = expanded
                continue
            for stored in _stored(stmt):  # any other statement: what it assigns is opaque from here on
                self.version[stored] = self.version.get(stored, 0) + 1
            self.env = {}  # and it may change anything in place
        if not changed:
            return None
        return Rewrite(self._source(changed), self.applied)

    def _expand(self, node: ast.expr) -> ast.expr:
        """`node` with known names replaced by their values, other names tagged with their version."""
        env, version = self.env, self.version

        class Expand(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.expr:
                if isinstance(n.ctx, ast.Load) and n.id in env:
                    return copy.deepcopy(env[n.id])
                return ast.Name(id=f"{n.id}@{version.get(n.id, 0)}", ctx=n.ctx)

        return cast(ast.expr, Expand().visit(copy.deepcopy(node)))

    def _expression(self, value: ast.expr) -> tuple[ast.expr, ast.expr] | None:
        """The expression with its idioms replaced (names folded back), and its expanded form."""
        expanded = self._expand(value)
        applied = []
        for _ in range(8):
            canon = Canon()
            root = canon.of(expanded)
            found = self._find(root, canon)
            if found is None:
                break
            node, idiom, replacement = found
            expanded = _replace(expanded, canon.orig[id(node)], replacement)
            applied.append(idiom.name)
        if not applied:
            return None
        folded = self._fold_back(expanded)
        if folded is None:
            return None
        self.applied += applied
        return folded, expanded

    def _find(self, root: Node, canon: Canon) -> tuple[Node, Idiom, ast.expr] | None:
        stack = [root]
        while stack:
            node = stack.pop(0)
            for idiom in IDIOMS:
                if id(node) not in canon.orig:
                    break
                for part, rest in _parts(idiom.pattern, node):
                    found = self._instance(idiom, part, rest, canon)
                    if found is not None:
                        return node, idiom, found
            if node[0] in ("mul", "add"):
                stack += list(node[1])
            elif node[0] == "call":
                stack += list(node[2])
            elif node[0] in ("neg", "recip"):
                stack.append(node[1])
        return None

    def _instance(self, idiom: Idiom, node: Node, rest: list[Node], canon: Canon) -> ast.expr | None:
        """The replacement for `node` (times the `rest` of its product, or plus the rest of its sum)
        if `idiom` matches it; None otherwise."""
        b = match(idiom.pattern, node, {})
        if b is None:
            return None
        parts = {k: _emit(v, canon) for k, v in b.items()}
        others = [_emit(r, canon) for r in rest]
        if any(p is None for p in [*parts.values(), *others]):
            return None
        if any(text not in ast.unparse(parts[var]) for var, text in idiom.needs):  # type: ignore[arg-type]
            return None
        template = idiom.also if self.alternative and idiom.also else idiom.template
        if "S" in b and _default_scale(b, canon):
            template = template.replace(", scale=S", "")
        out = _fill(template, parts)  # type: ignore[arg-type]
        for other in others:
            out = ast.BinOp(out, ast.Mult() if node[0] == "mul" else ast.Add(), other)  # type: ignore[arg-type]
        return out

    def _fold_back(self, expanded: ast.expr) -> ast.expr | None:
        """Inlined values written as their names again (where the name still holds them), and the
        version tags removed; None if the expression needs a value no name holds any more."""
        names = {ast.dump(v): k for k, v in self.env.items()}
        version = self.version
        stale = []

        class Fold(ast.NodeTransformer):
            def visit(self, n: ast.AST) -> ast.AST:
                if isinstance(n, ast.expr) and not isinstance(n, ast.Name) and ast.dump(n) in names:
                    return ast.Name(id=names[ast.dump(n)], ctx=ast.Load())
                return super().visit(n)

            def visit_Name(self, n: ast.Name) -> ast.Name:
                base, _, ver = n.id.partition("@")
                if ver and version.get(base, 0) != int(ver):
                    stale.append(base)
                return ast.Name(id=base, ctx=n.ctx)

        out = Fold().visit(copy.deepcopy(expanded))
        return None if stale else cast(ast.expr, out)

    def _source(self, changed: dict[int, ast.stmt]) -> str:
        """The function's source with the changed statements rewritten and the assignments that only
        fed a replaced expression removed (comments elsewhere kept)."""
        body = self.fn.body
        after = [changed.get(i, s) for i, s in enumerate(body)]
        removed = _dead(after) - _dead(body)
        lines = self.src.splitlines(keepends=True)
        out: list[str] = []
        cursor = 0
        for i, stmt in enumerate(body):
            start, end = stmt.lineno - 1, stmt.end_lineno or stmt.lineno
            out += lines[cursor:start]
            cursor = end
            if i in removed:
                continue
            if i in changed:
                indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
                out.append(textwrap.indent(ast.unparse(changed[i]), indent) + "\n")
            else:
                out += lines[start:end]
        out += lines[cursor:]
        return "".join(out)


def _dead(body: list[ast.stmt]) -> set[int]:
    """Indices of plain assignments whose name nothing after them reads (statements with other
    forms, or that may change something in place, are never dead)."""
    live: set[str] = set()
    dead: set[int] = set()
    for i in range(len(body) - 1, -1, -1):
        stmt = body[i]
        name = _simple(stmt)
        if name is not None and name not in live and not _in_place(stmt):
            dead.add(i)
            continue
        if name is not None:
            live.discard(name)
        live |= _loaded(stmt)
    return dead


def _parts(pattern: Node, node: Node) -> list[tuple[Node, list[Node]]]:
    """`node` whole, and where pattern and node are both products (or sums) and the node has more
    terms, each choice of as many terms as the pattern has with the terms left over."""
    out: list[tuple[Node, list[Node]]] = [(node, [])]
    if pattern[0] == node[0] and node[0] in ("mul", "add") and len(pattern[1]) < len(node[1]):
        terms = list(node[1])
        for chosen in itertools.combinations(range(len(terms)), len(pattern[1])):
            out.append(((node[0], tuple(terms[i] for i in chosen)), [t for i, t in enumerate(terms) if i not in chosen]))
    return out


def _default_scale(b: dict[str, Node], canon: Canon) -> bool:
    """Whether an attention's scale is 1/sqrt of the query's (or key's) last dimension: the library's
    default, which also holds where that dimension is 0 (a Python `d ** -0.5` would raise there)."""
    scale = b["S"]
    if scale[0] != "call" or scale[1] != "rsqrt" or scale[2][0][0] != "leaf" or id(scale[2][0]) not in canon.orig:
        return False
    dim = ast.unparse(canon.orig[id(scale[2][0])])
    return any(id(b[m]) in canon.orig and dim in (f"{ast.unparse(canon.orig[id(b[m])])}.shape[-1]",
                                                  f"{ast.unparse(canon.orig[id(b[m])])}.size(-1)")
               for m in ("Q", "K"))


def _emit(node: Node, canon: Canon) -> ast.expr | None:
    """Source for a bound canonical node: the expression it came from, or one built from its parts
    (`x ** -0.5` for rsqrt, valid for a tensor and for a Python number alike)."""
    if id(node) in canon.orig:
        return copy.deepcopy(canon.orig[id(node)])
    kind = node[0]
    if kind == "const":
        value = node[1]
        if math.isinf(value):
            return ast.parse(f"{'-' if value < 0 else ''}float('inf')", mode="eval").body
        return ast.Constant(int(value) if value.is_integer() and abs(value) < 2 ** 31 else value)
    parts = [_emit(p, canon) for p in (node[1] if kind in ("mul", "add") else node[2] if kind == "call" else
                                       (node[1],))]
    if any(p is None for p in parts):
        return None
    exprs: list[ast.expr] = parts  # type: ignore[assignment]
    if kind == "call" and node[1] == "rsqrt":
        return ast.BinOp(exprs[0], ast.Pow(), ast.Constant(-0.5))
    if kind == "call" and node[1] == "pow":
        return ast.BinOp(exprs[0], ast.Pow(), exprs[1])
    if kind == "recip":
        return ast.BinOp(ast.Constant(1.0), ast.Div(), exprs[0])
    if kind == "neg":
        return ast.UnaryOp(ast.USub(), exprs[0])
    if kind in ("mul", "add"):
        out = exprs[0]
        for e in exprs[1:]:
            out = ast.BinOp(out, ast.Mult() if kind == "mul" else ast.Add(), e)
        return out
    return None


def _fill(template: str, parts: dict[str, ast.expr]) -> ast.expr:
    class Fill(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.expr:
            return copy.deepcopy(parts[n.id]) if n.id in parts else n

    return cast(ast.expr, Fill().visit(ast.parse(template, mode="eval").body))


def _replace(tree: ast.expr, target: ast.expr, new: ast.expr) -> ast.expr:
    if tree is target:
        return new

    class Swap(ast.NodeTransformer):
        def visit(self, n: ast.AST) -> ast.AST:
            return new if n is target else super().visit(n)

    return cast(ast.expr, Swap().visit(tree))
