"""Execute stage: the agent loop, its tools, task workspaces and the executors that run batches."""
