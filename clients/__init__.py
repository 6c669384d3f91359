"""Small client libraries for the service's APIs (standard library only, no Django)."""
