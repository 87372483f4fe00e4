"""The harness directory: schemas, loading, validation and git versioning."""
