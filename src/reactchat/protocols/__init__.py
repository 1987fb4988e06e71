"""The two protocols an agent speaks with its model: the ReAct text protocol (``react``)
and native tool calling (``native``), over what both share (``base``)."""
