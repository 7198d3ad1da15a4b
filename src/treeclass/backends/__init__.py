"""Framework adapters. Each is imported only once its framework has been imported."""
