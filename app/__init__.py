"""SpecLab's web app (Gradio + plotly). It never imports torch: it asks the engine for a stream of steps,
which are plain Python values, and turns them into HTML and figures."""

import importlib.abc
import importlib.machinery
import sys


class _NoStubRewrites(importlib.abc.MetaPathFinder):
    """Gradio rewrites the type stub (.pyi) of every component class it defines, its own 81 included, each time it
    is imported: it parses their source, which is half of its import (0.9 s of 1.9 s on these 2 cores) in every
    process that serves the page. Nothing reads those stubs at run time (editors do), so this finder lets
    gradio.component_meta load as it is and then makes its stub writer a no-op. Any other module is left alone."""

    MODULE = "gradio.component_meta"

    def find_spec(self, name, path=None, target=None):
        if name != self.MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load = spec.loader.exec_module

        def load_without_stub_rewrites(module):
            load(module)
            if callable(getattr(module, "create_or_modify_pyi", None)):
                module.create_or_modify_pyi = lambda *args, **kwargs: None

        spec.loader.exec_module = load_without_stub_rewrites
        return spec


if "gradio" not in sys.modules and not any(isinstance(f, _NoStubRewrites) for f in sys.meta_path):
    sys.meta_path.insert(0, _NoStubRewrites())
