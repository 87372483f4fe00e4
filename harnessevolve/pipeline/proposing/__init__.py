"""What a proposer is given and how the coding-agent proposer runs: the generation's context
(failures, clusters, history) and ``--proposer agent``'s workspace, history and diff."""
