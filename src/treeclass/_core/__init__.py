"""The core: class description, generated code, node types, the registry, static values, saved state and the embedded tree."""
