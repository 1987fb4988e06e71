"""Runs made of runs: sub-agents (``nested``), plan-and-execute (``plan``, ``plan_loop``)
and Reflexion (``reflexion``, ``trials``)."""
