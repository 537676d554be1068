"""The harness: clients of the environment (reference agents, evaluation runner, LLM agent, report,
exploit scripts, solvability and docs generation). The core below it does no I/O; this package may."""
