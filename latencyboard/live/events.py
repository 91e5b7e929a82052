"""The live events published to a pipeline's pages (pure: no Django here).

Charts of the pipeline page name the ones they follow (``latencyboard.dashboards.charts``);
one no publisher sends is refused there.
"""

from typing import Final

POINTS: Final = "points"
"""New minutes of the pipeline were folded; the event carries their figures, in the shape of
the percentiles API's series (``latencyboard.rollups.publishing``)."""
STAGE_SHARES: Final = "stage_shares"
"""Stage shares of further minutes were computed (``latencyboard.rollups.stage_share_services``)."""

PIPELINE_EVENTS: Final = frozenset({POINTS, STAGE_SHARES})
