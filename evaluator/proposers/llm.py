"""LLM proposer: any OpenAI-compatible Chat Completions endpoint, streamed, with feedback from earlier rounds."""

from __future__ import annotations

import os
import re
import textwrap
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..evaluate import cpu_model
from ..kernel_profile import describe as describe_kernels
from ..models import CandidateResult
from ..target import extract_code
from . import Context, Proposal, Proposer
from .compiled import compiled_by_redline, python_of

SYSTEM = ("You optimise Python functions for speed without changing their results. Reply with the complete new "
          "function in one ```python fenced block; it must keep the function's name and signature and may add "
          "imports and helpers. Do not cache results across calls, skip work, or touch timers.")


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base_url: str = Field(description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    model: str = Field(description="model name the endpoint serves")
    refine_model: str | None = Field(None, description="optional stronger model for rounds after the first")
    temperature: float = 0.7
    max_tokens: int = 4096
    timeout_s: float = Field(120.0, gt=0)
    retries: int = Field(3, ge=0)
    candidates_per_round: int = Field(2, ge=1)
    choices_per_request: int = Field(1, ge=1, description="completions asked for per request (the API's n)")
    stream: bool = Field(True, description="stream replies (off for servers that cannot)")
    concurrency: int = 2


def _gpu_split(r: CandidateResult) -> str:
    """Where a CUDA call's time went, candidate and baseline: GPU time on the calling stream against the
    host's time to issue the call (a call whose issue time exceeds its GPU time is launch-bound)."""
    g = r.gpu or {}
    parts = []
    for who, prefix in (("candidate", ""), ("baseline", "baseline_")):
        gpu, issue = g.get(f"{prefix}gpu_time_s"), g.get(f"{prefix}issue_s")
        if isinstance(gpu, float) and isinstance(issue, float):
            bound = ", launch-bound" if issue > gpu else ""
            parts.append(f"{who} {gpu * 1e6:.1f} µs on the GPU, {issue * 1e6:.1f} µs to issue{bound}")
    return " | per call: " + "; ".join(parts) if parts else ""


def _feedback(history: list[CandidateResult]) -> str:
    if not history:
        return ""
    rows = []
    for r in history[-8:]:
        timing = f", {r.median_s * 1e3:.3f} ms, {r.speedup:.2f}x" if r.median_s and r.speedup else ""
        tail = textwrap.shorten(r.error_tail.strip().splitlines()[-1], 200) if r.error_tail.strip() else ""
        kernels = f" | Nsight Compute: {describe_kernels(r.kernel_profile)}" if r.kernel_profile else ""
        rows.append(f"- {r.id} ({r.origin}, {r.approach or 'rewrite'}): {r.status}{timing}: {r.reason}"
                    + (f" | error: {tail}" if tail else "") + _gpu_split(r) + kernels)
    return "Earlier candidates and what the evaluator measured:\n" + "\n".join(rows)


def build_prompt(ctx: Context) -> str:
    t = ctx.target
    parts = [f"Make `{t.qualname}` in {t.file.name} faster. Hardware: {ctx.hardware or f'{cpu_model()}, {os.cpu_count()} cores'}.",
             f"The function (lines {t.fn.line}-{t.fn.end_line}):\n```python\n{t.function_source}```",
             f"The whole module, for context:\n```python\n{t.source[:12000]}```"]
    captured = ctx.inputs_from == "captured"
    if ctx.inputs:
        where = "real calls captured from the program's own run, this one among them" if captured \
            else "from make_inputs; values are fresh each call"
        described = ctx.inputs if not captured or ctx.prompt_values else [without_values(d) for d in ctx.inputs]
        parts.append(f"It is timed on arguments like these ({where}):\n"
                     + "\n".join(f"- argument {i + 1}: {d}" for i, d in enumerate(described)))
    if ctx.local_types:
        held = sorted(ctx.local_types.items())
        parts.append("Its variables (parameters too) held these types on the calls traced (types only):\n" + "\n".join(
            f"- {name}: {' or '.join(t.removeprefix('builtins.') for t in types)}" for name, types in held[:40]))
    parts += _calls(ctx)
    if ctx.hotspot_note:
        parts.append("Profile: " + ctx.hotspot_note)
    fb = _feedback(ctx.history)
    if fb:
        parts.append(fb)
    if ctx.best is not None:
        if compiled_by_redline(ctx.best.code):
            parts.append(f"The best verified so far is {ctx.best.id} at {ctx.best.speedup:.2f}x: redline compiled this "
                         f"Python ({ctx.best.approach}):\n```python\n{best_code(ctx)}```\nImprove on it; write "
                         "Python (the compile decorators are redline's own, added by its built-in proposers).")
        else:
            parts.append(f"The best verified so far is {ctx.best.id} at {ctx.best.speedup:.2f}x:\n```python\n"
                         f"{ctx.best.code}```\nImprove on it.")
    return "\n\n".join(parts)


def best_code(ctx: Context) -> str:
    """The code a reply's edits apply to: the best verified candidate's (its Python, where redline compiled
    it: the decorators and their classes are redline's to add), else the target's own."""
    return python_of(ctx.best.code) if ctx.best else textwrap.dedent(ctx.target.function_source)


def _calls(ctx: Context) -> list[str]:
    """How often the target runs and how long a call takes: what a faster call is worth."""
    out = []
    manifest = ctx.target.inputs.manifest
    if ctx.inputs_from == "captured" and manifest is not None:
        out.append(f"In the captured run (`{' '.join(manifest.command)}`) it was called {manifest.calls_seen:,} times.")
    baseline = ctx.baseline_s or next((r.baseline_median_s for r in ctx.history if r.baseline_median_s), None)
    if baseline:
        out.append(f"One call of the original takes {baseline * 1e3:.3g} ms (median, as timed here).")
    return out


def without_values(description: str) -> str:
    """An argument's description with its values taken out (a scalar's example, a dict's keys): captured
    calls are the program's real data, and only their types and shapes go to an LLM unless redline.toml
    says `prompt_values = true`."""
    text = re.sub(r" \(e\.g\. .*?\)(?=$| x |,)", "", description)
    return re.sub(r"^dict of (\d+) \(.*\)$", r"dict of \1", text)


_SEARCH = re.compile(r"<<<<<<< SEARCH\n(.*?)\n=======\n(.*?)\n>>>>>>> REPLACE", re.S)


def apply_search_replace(base: str, reply: str) -> str | None:
    """Apply SEARCH/REPLACE blocks strictly (each search text must occur exactly once); None if any fails."""
    blocks = _SEARCH.findall(reply)
    if not blocks:
        return None
    out = base
    for search, replace in blocks:
        if out.count(search) != 1:
            return None
        out = out.replace(search, replace)
    return out


def code_from_reply(reply: str, base: str) -> str:
    """A reply's candidate: its first ```python block, else its SEARCH/REPLACE edits applied to `base`;
    else an empty candidate whose build error says why, so the next round's prompt asks for full code."""
    code = extract_code(reply)
    if code is None:
        code = apply_search_replace(base, reply)
    return code if code is not None else \
        "# the reply held no ```python block and no SEARCH/REPLACE edit that applies\n"


class AskingProposer(Proposer):
    """Candidates from a model reached through `ask` (prompts in, reply texts out, in order), such as an
    MCP client's own model through sampling; the prompts and the reading of replies are this module's."""

    reads_kernel_profiles = True
    reads_local_types = True

    def __init__(self, ask: Callable[[list[str]], list[str]], name: str = "client-model", per_round: int = 2) -> None:
        self.ask = ask
        self.name = name
        self.per_round = per_round

    def propose(self, ctx: Context) -> list[Proposal]:
        prompt = build_prompt(ctx)
        base = best_code(ctx)
        return [Proposal(code=code_from_reply(text, base), origin=self.name, approach="client rewrite",
                         parent=ctx.best.id if ctx.best else None, prompt=prompt, reply=text)
                for text in self.ask([prompt] * self.per_round)]


class LLMProposer(Proposer):
    name = "llm"
    reads_kernel_profiles = True
    reads_local_types = True

    def __init__(self, settings: LLMSettings) -> None:
        from openai import OpenAI

        self.settings = settings
        self.client = OpenAI(base_url=settings.base_url, api_key=os.environ.get("OPENAI_API_KEY") or "none",
                             timeout=settings.timeout_s, max_retries=settings.retries)
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        """Close the HTTP client: a request in flight (streamed or not) fails at once, and no retry starts."""
        self.cancelled.set()
        self.client.close()

    def _ask(self, model: str, prompt: str, n: int) -> list[tuple[str, int]]:
        """`n` replies to one request, each with its share of the tokens it cost."""
        s = self.settings
        kwargs = dict(model=model, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                      temperature=s.temperature, max_tokens=s.max_tokens, **({"n": n} if n > 1 else {}))
        texts: dict[int, list[str]] = {}
        tokens = 0
        if s.stream:
            for chunk in self.client.chat.completions.create(stream=True, **kwargs):  # type: ignore[call-overload]
                for choice in chunk.choices or []:
                    if choice.delta and choice.delta.content:
                        texts.setdefault(choice.index, []).append(choice.delta.content)
                if getattr(chunk, "usage", None):
                    tokens = chunk.usage.total_tokens
        else:
            done = self.client.chat.completions.create(stream=False, **kwargs)  # type: ignore[call-overload]
            for choice in done.choices or []:
                texts.setdefault(choice.index, []).append(choice.message.content or "")
            tokens = done.usage.total_tokens if done.usage else 0
        replies = ["".join(texts.get(i, [])) for i in range(max(n, len(texts)))]
        tokens = tokens or (len(prompt) + sum(len(r) for r in replies)) // 4
        return [(r, tokens // len(replies)) for r in replies]

    def propose(self, ctx: Context) -> list[Proposal]:
        s = self.settings
        if self.cancelled.is_set():
            return []
        model = s.refine_model if (s.refine_model and ctx.round > 1) else s.model
        prompt = build_prompt(ctx)
        n = min(s.choices_per_request, s.candidates_per_round)
        requests = [n] * (s.candidates_per_round // n) + ([s.candidates_per_round % n] if s.candidates_per_round % n else [])
        replies = [r for batch in _in_parallel(lambda k: self._ask(model, prompt, k), requests, s.concurrency)
                   for r in batch]
        out = []
        base = best_code(ctx)
        for reply, tokens in replies:
            out.append(Proposal(code=code_from_reply(reply, base), origin=f"llm:{model}", approach="llm rewrite",
                                parent=ctx.best.id if ctx.best else None, prompt=prompt, reply=reply, tokens=tokens))
        return out


def _in_parallel(fn: Callable[[int], list[tuple[str, int]]], items: list[int], workers: int) -> list[list[tuple[str, int]]]:
    """fn over items, `workers` at a time, in order; the first error raised. On daemon threads: a request
    abandoned by a cancel must not hold the interpreter's exit until its reply comes (a thread pool's
    workers are joined at exit, and a close of the HTTP client does not wake a blocked read)."""
    results: list[Any] = [None] * len(items)
    slots = threading.Semaphore(max(1, workers))

    def run(i: int) -> None:
        with slots:
            try:
                results[i] = ("ok", fn(items[i]))
            except BaseException as exc:
                results[i] = ("error", exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True, name="redline-llm-request")
               for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for kind, value in results:
        if kind == "error":
            raise value
    return [value for _, value in results]
