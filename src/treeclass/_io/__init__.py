"""Files and artifacts: safetensors files, leaf encodings, the artifact reader and the command line."""
