"""One place that turns what a front end asks for (the CLI's flags, the editor's settings, an MCP tool
call, the demo) into a run: its proposers, evaluation settings, budget and pool."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..profilers import Hotspot
from .backends import PoolFactory
from .models import EvalSettings, Limits, Report
from .progress import ProgressFn
from .proposers import Proposer
from .search import Budget, optimise
from .target import Target, TargetError

DEFAULT_MODEL = "gpt-4o-mini"


class NoProposer(Exception):
    """Nothing would propose candidates (CLI exit 3)."""


class LLMOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base_url: str
    model: str = Field("", description="empty: $REDLINE_MODEL, else DEFAULT_MODEL")
    refine_model: str | None = None
    candidates_per_round: int = 2
    choices_per_request: int = 1
    timeout_s: float = 120.0
    retries: int = 3
    temperature: float = 0.7
    stream: bool = True


class RunOptions(BaseModel):
    """What a run is asked to do, whoever asks."""

    model_config = ConfigDict(extra="forbid")
    builtin: bool = True
    only: list[str] | None = None  # the built-in proposers to use, by name; None for all of them
    candidates: Path | None = None  # a directory of candidate files
    llm: LLMOptions | None = None
    device: Literal["cpu", "cuda"] = "cpu"
    candidate_timeout: float = 60.0
    budget: int = 12
    rounds: int = 3
    time_limit: float = 600.0
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    jobs: int | None = None
    ray_pip: list[str] | None = None


def proposers(options: RunOptions) -> list[Proposer]:
    """The proposers `options` asks for, files first, then the built-ins, then the LLM."""
    out: list[Proposer] = []
    if options.candidates is not None:
        from .proposers.files import FilesProposer

        if not options.candidates.is_dir():
            raise TargetError(f"{options.candidates}: --candidates expects a directory")
        out.append(FilesProposer(options.candidates))
    if options.builtin:
        from .proposers.builtin import builtin_proposers

        found = builtin_proposers()
        if options.only is not None:
            names = [p.name for p in found]
            unknown = [n for n in options.only if n not in names]
            if unknown:
                raise TargetError(f"unknown built-in proposer {', '.join(unknown)}; they are {', '.join(names)}")
            found = [p for p in found if p.name in options.only]
        out += found
    if options.llm is not None and options.llm.base_url:
        from .proposers.llm import LLMProposer, LLMSettings

        o = options.llm
        try:
            settings = LLMSettings(base_url=o.base_url, model=o.model or os.environ.get("REDLINE_MODEL") or DEFAULT_MODEL,
                                   refine_model=o.refine_model, candidates_per_round=o.candidates_per_round,
                                   choices_per_request=o.choices_per_request, timeout_s=o.timeout_s,
                                   retries=o.retries, temperature=o.temperature, stream=o.stream)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise TargetError(f"LLM setting {err['loc'][0]}: {err['msg']}")
        out.append(LLMProposer(settings))
    return out


def pool_factory(options: RunOptions) -> PoolFactory | None:
    """The pool to evaluate on: None for this machine's."""
    if options.backend != "ray":
        return None
    from .backends.ray_cluster import ray_factory

    return ray_factory(options.ray_address or None, options.jobs, options.ray_pip)


def execute(target: Target, options: RunOptions, progress: ProgressFn | None = None,
            cancel: threading.Event | None = None, extra: Sequence[Proposer] = (), hotspot: Hotspot | None = None,
            resume: str | None = None) -> Report:
    """Run the search on `target` as `options` asks (plus `extra` proposers, such as an agent's model)."""
    found = proposers(options) + list(extra)
    if not found:
        raise NoProposer("no proposer: give --candidates DIR, an LLM endpoint (--base-url or OPENAI_BASE_URL), "
                         "or use the built-in proposers")
    settings = EvalSettings(device=options.device, limits=Limits(wall_s=options.candidate_timeout))
    budget = Budget(candidates=options.budget, rounds=options.rounds, wall_s=options.time_limit)
    return optimise(target, found, settings, budget, progress, cancel, make_pool=pool_factory(options),
                    resume=resume, hotspot=hotspot)
