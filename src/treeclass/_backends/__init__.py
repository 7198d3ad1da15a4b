"""The framework adapters, one module each, and the activation table that loads them.

See ``docs/contributing.md`` and :data:`treeclass._backends.activation.FRAMEWORKS`.
"""
