"""Workspace tests: the `store` fixture of tests/store (both backends) for the store-level tests;
the relay-level tests use the root `relay` / `sqlite_relay` fixtures."""

from __future__ import annotations

from tests.store.conftest import store

__all__ = ["store"]
