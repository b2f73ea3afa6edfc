"""``python -m harness.export``: a run's report or transcript (``__main__``),
and the renderers it picks from by ``--as`` style (``styles``), one module per
role: the report's shape, a run folder as a report, md/txt/json, the views."""
