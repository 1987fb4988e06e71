"""Built-in tools: ``calculator`` and ``ask_user``."""

from reactchat.toolbox._ask_user import ask_user
from reactchat.toolbox._calculator import CalculatorError, calculator, evaluate

__all__ = ["CalculatorError", "ask_user", "calculator", "evaluate"]
