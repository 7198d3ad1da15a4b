"""Files and artifacts: safetensors files, leaf encodings, the artifact reader, the CLI."""
