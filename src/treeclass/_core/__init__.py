"""The core: classes described, code generated, node types, registry, statics, state, tree.

Imports nothing of the package outside ``_core`` but ``treeclass._errors``. (``treeclass._pickle``
builds on the core; ``import treeclass`` activates its backend.)
"""
