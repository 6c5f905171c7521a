"""Models: attrs classes, the one cattrs converter, and whole documents of either format."""
