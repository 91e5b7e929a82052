"""The channel kinds there are: every module of :mod:`latencyboard.notifications.kinds`
declares one as ``KIND`` and is registered here on import, so a new kind is one new module.

A kind a channel names that is not registered (its module removed, a row written by hand) is
an error, :class:`UnknownChannelKindError`, never sent in another kind's format.
"""

from __future__ import annotations

import importlib
import pkgutil

from latencyboard.notifications import kinds as kinds_package
from latencyboard.notifications.kind import ChannelKind

NAME_LIMIT = 16  # the length of ``Channel.kind``

_KINDS: dict[str, ChannelKind] = {}


class UnknownChannelKindError(LookupError):
    def __init__(self, name: str) -> None:
        self.name = name
        known = ", ".join(_KINDS)
        super().__init__(f"unknown channel kind {name!r}: choose one of {known}")


def register(kind: ChannelKind) -> None:
    """Make ``kind`` one a channel may name; its name must be new and fit ``Channel.kind``."""
    if not 0 < len(kind.name) <= NAME_LIMIT:
        raise ValueError(f"a channel kind's name has 1 to {NAME_LIMIT} characters: {kind.name!r}")
    if kind.name in _KINDS:
        raise ValueError(f"the channel kind {kind.name!r} is registered already")
    _KINDS[kind.name] = kind


def unregister(name: str) -> None:
    del _KINDS[name]


def kind_named(name: str) -> ChannelKind:
    """The registered kind called ``name``; raises :class:`UnknownChannelKindError`."""
    try:
        return _KINDS[name]
    except KeyError:
        raise UnknownChannelKindError(name) from None


def find(name: str) -> ChannelKind | None:
    """The registered kind called ``name``, or None (for pages, which show it as unknown)."""
    return _KINDS.get(name)


def kinds() -> tuple[ChannelKind, ...]:
    return tuple(_KINDS.values())


def choices() -> list[tuple[str, str]]:
    """(name, label) of every kind, for a form's or serializer's choice of kind."""
    return [(kind.name, kind.label) for kind in _KINDS.values()]


def label(name: str) -> str:
    """A kind's label, or what a page shows for a channel of an unknown one."""
    kind = _KINDS.get(name)
    return kind.label if kind else f"unknown kind “{name}”"


def target_is_secret(name: str, target: str) -> bool:
    """Whether a channel's target is shown masked even to its team's admins: its kind says its
    targets are credentials, some kind knows ``target`` for one of its own, or its kind is
    unknown (what its target holds cannot be told)."""
    kind = _KINDS.get(name)
    if kind is None or kind.target_is_secret:
        return True
    return any(other.holds_own_credential(target) for other in _KINDS.values())


def _discover() -> None:
    for module in pkgutil.iter_modules(kinds_package.__path__):
        declared = importlib.import_module(f"{kinds_package.__name__}.{module.name}").KIND
        # kinds/slack.py declares "slack": a stored kind names the module that sends it.
        if not isinstance(declared, ChannelKind) or declared.name != module.name:
            raise TypeError(f"{module.name}.KIND is not a ChannelKind named {module.name!r}")
        register(declared)


_discover()
