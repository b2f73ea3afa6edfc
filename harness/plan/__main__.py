from harness.plan.cli import cli

cli()
