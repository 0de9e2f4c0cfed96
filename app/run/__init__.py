"""The room for a run: what a Compare run will do (plan.py), what happens as it runs (events.py), the one code
that changes a lane (runner.py), and the page-free state a run's events fold into."""
