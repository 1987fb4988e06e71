"""Testing agents: scripted models, export and import of sessions, and replay of a recorded one.

``replay(agent, source)`` runs a recorded session again with today's code and prompts,
serving the recorded model replies and tool results (no model and no tool is called), and
raises ``Diverged`` at the first difference; ``Recorder(model)`` keeps the requests of a
recording so that ``replay(..., strict=True)`` compares the prompts too. See docs/testing.md.
"""

from reactchat.errors import Diverged
from reactchat.models._scripted import ScriptedModel, tool_call, tool_calls
from reactchat.testing._export import FORMAT, VERSION, BadRecord, Record, export_lines, import_record, read_record
from reactchat.testing._model import ReplayModel, recorded_replies
from reactchat.testing._record import Recorder
from reactchat.testing._replay import Replayed, decisions, load, replay, replay_sync
from reactchat.testing._schema import line_schema

__all__ = [
    "FORMAT",
    "VERSION",
    "BadRecord",
    "Diverged",
    "Record",
    "Recorder",
    "ReplayModel",
    "Replayed",
    "ScriptedModel",
    "decisions",
    "export_lines",
    "import_record",
    "line_schema",
    "load",
    "read_record",
    "recorded_replies",
    "replay",
    "replay_sync",
    "tool_call",
    "tool_calls",
]
