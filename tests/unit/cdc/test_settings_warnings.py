"""Warnings about the upstream's replication settings say what to change."""

from __future__ import annotations

from cdc.slots import ServerSettings, settings_warnings


def test_good_settings_need_no_warning() -> None:
    assert settings_warnings(ServerSettings("logical", 10, 10, 2, 2)) == []


def test_each_problem_names_its_fix() -> None:
    warnings = settings_warnings(ServerSettings("replica", 2, 3, 2, 3))
    assert len(warnings) == 3
    assert "ALTER SYSTEM SET wal_level = logical" in warnings[0]
    assert "max_replication_slots = 7" in warnings[1] and "restart" in warnings[1]
    assert "max_wal_senders = 8" in warnings[2]


def test_reconnects_need_no_spare_slot() -> None:
    assert settings_warnings(ServerSettings("logical", 2, 2, 2, 2), slots_needed=0) == []
