"""What a Compare run will do, decided once before any lane runs: the controls read by name, each lane's
configuration checked once, the prompt encoded once, and each lane's drafts per step after its drafter's cap (what
it will run, which the run's end reports: "drafted 8 per step, not 12" comes from here, never from a page's
start-up caps read again after the run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.contract.interface import EngineLike
from engine.contract.methods import METHOD_REGISTRY
from engine.contract.types import GenerationConfig

from ..settings import RUN_INPUTS, SettingError, Settings, parse_controls, parse_show_drafts
from .runner import LaneRun


def read_controls(values: Mapping[str, Any], available: Sequence[str] | None = None) -> tuple[Settings, bool]:
    """The Run button's controls by name (RUN_INPUTS), unchecked as the page sends them: the settings and whether
    drafts are shown; SettingError names the first bad or missing one."""
    missing = [name for name in RUN_INPUTS if name not in values]
    if missing:
        raise SettingError(f"the Run event's inputs lack {', '.join(missing)}")
    return parse_controls(values, available), parse_show_drafts(values["show_drafts"])


def controls_by_name(values: Sequence[Any]) -> dict[str, Any]:
    """The Run event's inputs, in RUN_INPUTS order as the page and the API send them, by name."""
    return dict(zip(RUN_INPUTS, values))


def drafts_run(method: str, asked: int, cap: int | None) -> int | None:
    """The drafts per step a lane runs: the asked number after its drafter's trained block (None: it drafts none)."""
    if not METHOD_REGISTRY[method].drafts:
        return None
    return asked if cap is None else min(asked, cap)


@dataclass(frozen=True)
class PlannedLane:
    method: str
    config: GenerationConfig  # checked once, here
    drafts_per_step: int | None  # what it will run (drafts_run)

    def lane(self) -> LaneRun:
        return LaneRun(self.method, self.config, drafts_per_step=self.drafts_per_step)


@dataclass(frozen=True)
class RunPlan:
    settings: Settings
    lanes: tuple[PlannedLane, ...]
    prompt_ids: tuple[int, ...]  # the prompt, encoded once (it fits the context: the engine said so)

    @classmethod
    def of(cls, settings: Settings, engine: EngineLike, caps: Mapping[str, int | None]) -> "RunPlan":
        """Check every lane's configuration and the prompt, once each (EngineError names the first problem)."""
        lanes = []
        for method in settings.methods:
            config = settings.config(method)
            config.validate()
            lanes.append(PlannedLane(method, config, drafts_run(method, config.drafts_per_step, caps.get(method))))
        return cls(settings, tuple(lanes), tuple(engine.encode_prompt(settings.prompt)))

    def lane_runs(self) -> list[LaneRun]:
        return [lane.lane() for lane in self.lanes]

    def asked(self) -> dict[str, int]:
        """Each drafting lane's drafts per step as asked."""
        return {lane.method: lane.config.drafts_per_step for lane in self.lanes if lane.drafts_per_step is not None}
