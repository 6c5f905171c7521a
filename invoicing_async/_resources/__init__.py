"""Resource clients: one class per resource of the specification, returning models."""
