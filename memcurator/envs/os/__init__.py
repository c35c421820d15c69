"""The OS-interaction environment: LifelongAgentBench bash tasks in a bubblewrap sandbox."""
