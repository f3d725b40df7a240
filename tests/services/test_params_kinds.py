"""Declared parameters of the operator, logger, replay and viewer kinds (protocol/params.py): each kind's class
has one field per key its module declares for its table (``TABLE_KEYS`` of a table it owns, ``OPTIONS`` of its
``[services.NAME]``), every field with a unit, and a service built from a configuration of non-default values holds
exactly those values."""

from __future__ import annotations

import dataclasses

import pytest

from protocol import registry
from protocol.params import is_params, units


def _declared_keys(kind: str) -> set[str]:
    """The keys a kind's module declares for the table it reads: its own table's ``TABLE_KEYS``, else the extra
    keys of its service table (``OPTIONS``)."""
    mod = registry.kind_module(kind)
    table_keys = getattr(mod, "TABLE_KEYS", {})
    if kind in table_keys:
        return set(table_keys[kind])
    return set(mod.OPTIONS)


@pytest.mark.parametrize("kind", ["operator", "logger"])
def test_a_kinds_declared_parameters_are_its_tables_keys_each_with_a_unit(kind):
    cls = registry.params(kind)
    assert cls is not None and is_params(cls)
    assert {f.name for f in dataclasses.fields(cls)} == _declared_keys(kind)
    u = units(cls)
    assert set(u) == _declared_keys(kind) and all(isinstance(x, str) and x for x in u.values()), u


def test_the_operator_holds_its_configured_script():
    from services import operator

    script = [{"t": 0, "cmd": "mode", "mode": "manual", "frame": "orbiter"},
              {"t": 1.5, "cmd": "rate", "v": [0.02, 0.0, -0.01], "w": [0.0, 0.0, 0.0]},
              {"t": 20, "cmd": "capture"}]
    m = operator.build({"operator": {"script": script}}, "operator", 10_000_000)
    assert m.params == operator.OperatorParams(script=(
        {"t": 0.0, "cmd": "mode", "mode": "manual", "frame": "orbiter"},
        {"t": 1.5, "cmd": "rate", "v": [0.02, 0.0, -0.01], "w": [0.0, 0.0, 0.0]},
        {"t": 20.0, "cmd": "capture"}))
    assert all(type(c["t"]) is float for c in m.params.script)
    assert operator.build({}, "operator", 10_000_000).params.script == ()
    # the player publishes what the parameters hold: the command at 1.5 s in the step (1.49, 1.5]
    m.initial(0)
    assert m.step(1_490_000_000, 10_000_000, None)["operator/command"]["events"] == [
        {"kind": "rate", "t": 1.5, "v": [0.02, 0.0, -0.01], "w": [0.0, 0.0, 0.0]}]


def test_the_logger_holds_its_configured_keys_and_records_with_them(tmp_path):
    from services import logger

    log = tmp_path / "run.mcap"
    svc = {"kind": "logger", "rate_hz": 1000, "path": str(log), "topics": ["orbiter/state", "arm/state"],
           "chunk_size": 4096, "flush_interval": 0.25, "writer_cpus": [0]}
    cfg = {"sim": {"log": str(tmp_path / "other.mcap")}, "services": {"rec": svc}}
    assert logger.validate(cfg, "rec") == []
    assert logger.LoggerParams.from_service(cfg, "rec") == logger.LoggerParams(
        path=str(log), topics=("orbiter/state", "arm/state"), chunk_size=4096, flush_interval=0.25,
        schemas_from=None, writer_cpus=(0,))
    p = logger.LoggerParams.from_service({"services": {"rec": {"kind": "logger", "rate_hz": 1000,
                                                                "schemas_from": "old.mcap"}}}, "rec")
    assert (p.path, p.topics, p.schemas_from, p.writer_cpus) == (None, (), "old.mcap", ())
    assert type(p.flush_interval) is float and p.flush_interval == 1.0 and p.chunk_size == 1 << 20
    sink = logger.build(cfg, "rec", 1_000_000)
    try:
        assert sink.path == log and sink.topics == ("orbiter/state", "arm/state")
    finally:
        sink.close()
    assert log.is_file() and not (tmp_path / "other.mcap").exists()
