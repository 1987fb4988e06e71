"""Pydantic models built and kept without pydantic's per-instance costs, for what the engine
makes on every step and what a server holds for every session.

This is the one module that writes pydantic's slots. ``trusted`` builds a model from values
the engine made itself (valid already) without validating them again; a model whose every
field was given shares its class's set of field names (``AllFields``) instead of a set of
its own, 216–728 bytes each, a third of an event held in memory. Measured with
``python benchmarks/server_load.py --sessions 1000 --turns 2`` (peak server RSS per
session, median of 5 alternating pairs): memory store 59.4 → 46.9 KiB, SQLite 55.3 →
45.8 KiB — what keeps a server within 50 KiB a session.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of ``cls`` holding ``values`` (every field, each already valid), not
    validated: for what the engine builds on every step from parts it made itself
    (what ``model_construct`` does, without its per-field Python loop)."""
    model = _new(cls)
    _set_dict(model, values)
    every = _every_field(cls)
    _set_fields_set(model, every if len(values) == len(every) else set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


class AllFields(set[str]):
    """The ``model_fields_set`` of a model whose every field was given: one per class, shared
    by its instances. A set of its own per instance is 216–728 bytes, a third of what an event
    held in memory weighs. A ``set`` (pydantic's ``exclude_unset`` reads it as one) that
    cannot change: pydantic's ``__setattr__`` adds a field's name, which is already there,
    and a copy (``model_copy``, ``copy.copy``) is a plain ``set`` of its own, free to change."""

    __slots__ = ()

    def add(self, name: str) -> None:
        """Nothing to do for a field's name (what pydantic adds on assignment)."""
        if name not in self:
            raise TypeError(f"{name!r} is not a field: the set of every field does not change")

    def _unchanging(self, *args: Any) -> Any:
        raise TypeError("the set of every field is shared by a class's models: change a copy of it")

    discard = remove = pop = clear = update = _unchanging
    difference_update = intersection_update = symmetric_difference_update = _unchanging
    __ior__ = __iand__ = __isub__ = __ixor__ = _unchanging

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return set, (list(self),)


@functools.cache
def _every_field(cls: type[BaseModel]) -> AllFields:
    return AllFields(cls.__pydantic_fields__)


def share_fields_set(model: BaseModel) -> None:
    """Give ``model`` its class's shared set of every field if every field was set."""
    every = _every_field(type(model))
    if len(model.__pydantic_fields_set__) == len(every):
        _set_fields_set(model, every)


# the slots of every pydantic model, set directly (``object.__setattr__`` looks each one up)
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def numbered(event: M, seq: int) -> M:
    """An event read back from a store, given ``seq`` (its place in the log) without
    pydantic's ``__setattr__``; it and its usage, every field of each set now, share their
    classes' sets of every field (what a server holds for every session it reads). Through
    ``__setattr__``, ``seq`` cost 0.9 µs against 0.2 µs here, on top of the 5.2 µs of
    validating an ``ObservationEvent``'s JSON (``timeit``, best of 7 alternating runs)."""
    event.__dict__["seq"] = seq
    event.__pydantic_fields_set__.add("seq")
    share_fields_set(event)
    usage = event.__dict__.get("usage")
    if usage is not None:
        share_fields_set(usage)
    return event


def place(event: BaseModel, session: str, turn: int, step: int, agent: str, run: str) -> None:
    """Give an event its place in a session's log (what the engine does to every event it
    records), written to the model's ``__dict__`` at once instead of through five calls of
    pydantic's ``__setattr__`` each: those were 7 % of a step's CPU in a profile of
    ``benchmarks/engine_overhead.py`` (15 calls a step)."""
    event.__dict__.update(session=session, turn=turn, step=step, agent=agent, run=run)


__all__ = ["AllFields", "numbered", "place", "share_fields_set", "trusted"]
