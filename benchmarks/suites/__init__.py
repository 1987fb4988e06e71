"""Public agent benchmarks run through ``reactchat.evals`` (data from installed wheels)."""
