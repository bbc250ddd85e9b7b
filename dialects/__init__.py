"""The dialects clients already speak: OpenAI's Chat Completions, on Flywheel's own service."""
