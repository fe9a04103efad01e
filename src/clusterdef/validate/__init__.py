"""Validation: schema errors and named semantic checks, all reported at once as findings."""
