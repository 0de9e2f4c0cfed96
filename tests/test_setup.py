"""scripts/setup.sh compiles bytecode only for the installed files that the app and the tests can import: the trees
it names as unused must hold none of the modules they do import (a miss costs every process that imports it its
compile time where PYTHONDONTWRITEBYTECODE is set: slower, never wrong, so only a test sees it)."""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

from engine.contract.types import GenerationConfig

from conftest import ROOT


def unused_trees() -> re.Pattern:
    """The pattern setup.sh hands to `compileall -x`, read from its `unused=` and `unused+=` lines."""
    lines = (ROOT / "scripts" / "setup.sh").read_text().splitlines()
    parts = [re.fullmatch(r"\s*unused\+?='(.*)'", line).group(1) for line in lines if re.match(r"\s*unused\+?=", line)]
    assert parts, "setup.sh names no unused trees"
    return re.compile("".join(parts))


def test_setup_compiles_every_module_the_app_imports(embedded_engine):
    import plotly.io

    from app.draw.charts import acceptance_figure, timeline_figure
    from app.main import build_app

    build_app(embedded_engine)
    run = embedded_engine.generate("def f(x):", GenerationConfig(method="dspark", max_new_tokens=8))
    rates = {"dspark": run.per_position_acceptance}  # what the chart draws: conditional acceptance, and survival
    for figure in (timeline_figure({"dspark": run.steps}), acceptance_figure(rates)):
        plotly.io.to_json(figure)  # what gradio sends the page: every trace and layout part is built
    unused = unused_trees()
    site = Path(sysconfig.get_path("purelib")).resolve()
    imported = [Path(m.__file__).resolve() for m in list(sys.modules.values()) if getattr(m, "__file__", None)]
    imported = [path for path in imported if site in path.parents]
    assert len(imported) > 1000  # torch, transformers, gradio, plotly, ...: the check looked where they are
    missed = sorted(str(path.relative_to(site)) for path in imported if unused.search(str(path)))
    assert not missed, missed
