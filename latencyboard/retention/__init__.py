"""Tiered retention of raw spans: days past the hot period keep only the traces worth opening."""
