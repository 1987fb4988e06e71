"""The engine: one turn of one agent, from a message to its result (``Run``), and the
steps of each run (``Loop``), with what they share: guards, usage, tracing, threads."""
