"""Channel-layer group names (pure)."""


def team_group(team_id: int) -> str:
    """The group the overview of a team listens on."""
    return f"team.{team_id}"


def pipeline_group(pipeline_id: int) -> str:
    """The group the pages of one pipeline listen on."""
    return f"pipeline.{pipeline_id}"
