"""Facts kept across sessions: ``Agent(memory=Memory(scope="user-42"))``.

See ``docs/memory.md``.
"""

from reactchat.memory._memory import Memory, user_of
from reactchat.memory._tools import attach, memory_tools
from reactchat.store._facts import Fact

__all__ = ["Fact", "Memory", "attach", "memory_tools", "user_of"]
