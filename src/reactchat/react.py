"""The text protocol's parser under its public name: ``reactchat.react.parse(text)``."""

from reactchat.protocols.base import FormatError
from reactchat.protocols.react import Action, FinalAnswer, parse, parse_input

__all__ = ["Action", "FinalAnswer", "FormatError", "parse", "parse_input"]
