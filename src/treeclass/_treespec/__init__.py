"""The treespec document: its format, codec, reader and conversion to the frameworks' structures."""
