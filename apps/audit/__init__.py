"""The org mirror chain as auditors read it: paginated windows, newest first."""
