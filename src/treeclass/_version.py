"""This release: ``treeclass.__version__`` and ``treeclass --version``; hatch reads it here."""

__version__ = "0.1.0"
