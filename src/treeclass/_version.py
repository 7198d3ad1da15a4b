"""This release's version: ``treeclass.__version__``, ``treeclass --version``; hatch reads it here."""

__version__ = "0.1.0"
