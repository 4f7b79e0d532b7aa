"""The study store: the only package that speaks SQL."""

from engine.store.store import SCHEMA_VERSION, Store, StoreSchemaError

__all__ = ["SCHEMA_VERSION", "Store", "StoreSchemaError"]
