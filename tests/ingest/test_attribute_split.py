"""Which attributes go into a shared span template: those whose values repeat."""

from __future__ import annotations

from ingest.attribute_split import AttributeSplit


def test_repeating_scalars_are_shared_and_the_rest_stays_in_the_row():
    # given a split that has seen nothing
    split = AttributeSplit(max_values=3)

    # when a span with scalar and compound attributes is split
    shared, own = split.split({"model.version": "v8", "cache_hit": True, "tags": ["a", "b"]})

    # then the scalars are shared, the array stays in the row
    assert (shared, own) == ({"model.version": "v8", "cache_hit": True}, {"tags": ["a", "b"]})


def test_a_key_past_its_distinct_values_stays_in_the_row_from_then_on():
    # given a key that has shown three distinct values, the most a shared key may
    split = AttributeSplit(max_values=3)
    for tenant in ("t1", "t2", "t3"):
        assert split.split({"tenant.id": tenant, "route": "/score"})[1] == {}

    # when a fourth value arrives, and then a value seen before
    fourth = split.split({"tenant.id": "t4", "route": "/score"})
    again = split.split({"tenant.id": "t1", "route": "/score"})

    # then the key stays in the row both times, the repeating one is still shared
    assert fourth == ({"route": "/score"}, {"tenant.id": "t4"})
    assert again == ({"route": "/score"}, {"tenant.id": "t1"})


def test_keys_beyond_the_tracked_count_stay_in_the_row():
    # given a split that tracks two keys
    split = AttributeSplit(max_keys=2)

    # when a span carries three
    shared, own = split.split({"a": 1, "b": 2, "c": 3})

    # then the third is kept in the row
    assert (shared, own) == ({"a": 1, "b": 2}, {"c": 3})
