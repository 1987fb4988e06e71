"""LangChain tools as reactchat tools, under their public name (see ``reactchat.tools.langchain``)."""

from reactchat.tools.langchain import from_langchain, is_langchain_tool

__all__ = ["from_langchain", "is_langchain_tool"]
