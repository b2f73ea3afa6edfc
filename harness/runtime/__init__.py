"""What a run's agents and nodes work in, below the formats: the run and
agent contexts (``context``), a role's bound model and its request hash
(``calls``), the event log (``events``), run-long tools (``tools``), stops
(``interrupt``), budgets (``budget``), parallel calls of one step
(``fanout``) and OpenTelemetry spans (``otel``, ``otel_provider``). The
engine (``harness.engine``), above the formats, drives a format's graph in
them. Nothing is imported on load: import from the modules."""
