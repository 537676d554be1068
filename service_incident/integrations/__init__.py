"""Where other software plugs in: the actions as tools (MCP, TRL, function calling), the observations as
text for a language model, TRL's `environment_factory`, a Gymnasium environment and the prompt dataset.

Everything here is derived from `service_incident.models`: a new action type or observation field
reaches every adapter without an edit. Importing this package loads no optional dependency.
"""
