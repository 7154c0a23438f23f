"""Storage backends. ``_base.Backend`` is the interface; ``sqlite`` implements it."""
