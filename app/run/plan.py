"""What a Compare run will do, decided once before any lane runs: the controls read by name, and each lane's
checked request from the engine (engine/contract/types.py Request: the prompt encoded once for all lanes, each
configuration validated once, its drafts per step after its drafter's cap). The request says what the lane will
run, and the run's end reports it: "drafted 8 per step, not 12" comes from there, never from a page's start-up
caps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.contract.interface import EngineLike
from engine.contract.types import Request

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


@dataclass(frozen=True)
class PlannedLane:
    method: str
    request: Request  # the engine's checked request: its config validated, its drafts per step after the cap

    def lane(self) -> LaneRun:
        return LaneRun(self.method, self.request.config, request=self.request)


@dataclass(frozen=True)
class RunPlan:
    settings: Settings
    lanes: tuple[PlannedLane, ...]

    @classmethod
    def of(cls, settings: Settings, engine: EngineLike) -> "RunPlan":
        """Every lane's request from the engine, the prompt encoded once for all of them and each configuration
        validated once (EngineError names the first problem); the runs check nothing again."""
        requests = engine.requests(settings.prompt, [settings.config(method) for method in settings.methods])
        return cls(settings, tuple(PlannedLane(m, r) for m, r in zip(settings.methods, requests)))

    @property
    def prompt_ids(self) -> tuple[int, ...]:
        """The prompt, encoded once (it fits the context: the engine said so)."""
        return self.lanes[0].request.prompt_ids if self.lanes else ()

    def lane_runs(self) -> list[LaneRun]:
        return [lane.lane() for lane in self.lanes]

    def asked(self) -> dict[str, int]:
        """Each drafting lane's drafts per step as asked (its request says what it runs)."""
        return {lane.method: self.settings.config(lane.method).drafts_per_step for lane in self.lanes
                if lane.request.drafts_per_step is not None}
