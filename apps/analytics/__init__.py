"""Headline governance counters from the mirror and the approval queue."""
