"""Built-in proposers that work offline: numba for numeric Python loops, torch.compile for torch code."""

from __future__ import annotations

import importlib.util
import re
import textwrap

from . import Context, Proposal, Proposer


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class NumbaProposer(Proposer):
    """`numba.njit` variants of a function whose body loops, when numba is installed."""

    name = "numba"

    def propose(self, ctx: Context) -> list[Proposal]:
        src = textwrap.dedent(ctx.target.function_source)
        if ctx.round != 1 or "." in ctx.target.qualname or not re.search(r"^\s+(for|while) ", src, re.M) \
                or not _available("numba"):
            return []
        body = re.sub(r"^@.*\n", "", src, flags=re.M)
        return [Proposal(code=f"import numba\n\n\n@numba.njit(cache=False{opts})\n{body}", origin="builtin:numba",
                         approach=f"numba.njit{opts}", trusted=True)
                for opts in ("", ", fastmath=True")]


class TorchCompileProposer(Proposer):
    """`torch.compile` of a torch function, in a few modes."""

    name = "torch.compile"

    def propose(self, ctx: Context) -> list[Proposal]:
        t = ctx.target
        if ctx.round != 1 or "torch" not in t.source or "." in t.qualname or not _available("torch"):
            return []
        src = textwrap.dedent(t.function_source)
        eager = f"_redline_eager_{t.name}"
        renamed = re.sub(rf"^def {re.escape(t.name)}\(", f"def {eager}(", src, count=1, flags=re.M)
        out = []
        for mode in ("default", "max-autotune-no-cudagraphs"):
            code = f"import torch\n\n\n{renamed}\n\n{t.name} = torch.compile({eager}, mode={mode!r}, dynamic=False)\n"
            out.append(Proposal(code=code, origin="builtin:torch.compile", approach=f"torch.compile({mode})",
                                trusted=True))
        return out


def builtin_proposers() -> list[Proposer]:
    return [NumbaProposer(), TorchCompileProposer()]
