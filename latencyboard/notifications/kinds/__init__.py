"""One module per kind of channel, each declaring everything about its kind as ``KIND`` (a
:class:`latencyboard.notifications.kind.ChannelKind`): :mod:`latencyboard.notifications.registry`
registers every module here."""
