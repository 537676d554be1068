"""Service Incident: an on-call SRE environment; this package is its sans-I/O core."""
