"""One adapter per framework; see ``docs/contributing.md`` and ``treeclass._backends.activation.FRAMEWORKS``."""
