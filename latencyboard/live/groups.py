"""Channel-layer group names (pure)."""


def team_group(team_id: int) -> str:
    """The group every live page of a team listens on."""
    return f"team.{team_id}"
