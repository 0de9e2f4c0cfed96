"""SpecLab's web app (Gradio + plotly). It never imports torch: it asks the engine for a stream of steps,
which are plain Python values, and turns them into HTML and figures."""
