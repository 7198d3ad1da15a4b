"""The core: classes described, code generated, node types, registry, statics, state, tree.

Imports nothing of the package outside ``_core`` but ``treeclass._errors`` (and, at the top
of the core, ``api`` imports ``treeclass._pickle``, which builds on the rest of the core).
"""
