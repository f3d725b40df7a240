"""The service-kind registry (protocol/registry.py): where a kind's module comes from, the contract it is
checked against, capabilities, and the worked example of docs/extending.md run as written."""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from errors import ConfigError
from protocol import registry
from protocol.codec import decode
from protocol.config import KINDS, load, register_schemas, validate
from protocol.logfile import open_log
from protocol.realtime import priorities

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """A folder on sys.path for modules written by a test (and the registry's entry-point cache cleared)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._entry_points.cache_clear()
    yield tmp_path
    registry._entry_points.cache_clear()
    for name in [m for m in sys.modules if m == "zz" or m.startswith(("zz.", "zz_"))]:
        del sys.modules[name]


def _module(folder: Path, name: str, body: str) -> None:
    """Module ``zz.NAME`` (a dotted kind: one written in a config as a module path)."""
    (folder / "zz").mkdir(exist_ok=True)
    (folder / "zz" / "__init__.py").write_text("")
    (folder / "zz" / f"{name}.py").write_text(textwrap.dedent(body))


_MINIMAL = textwrap.dedent("""
    TABLES = ()
    def validate(config, name):
        return []
    def build(config, name, period_ns):
        return None
""")


@pytest.mark.parametrize("kind", list(registry.BUILTIN))
def test_every_shipped_kind_satisfies_the_contract(kind):
    if kind == "fmu":
        pytest.importorskip("fmpy")
    mod = registry.kind_module(kind)
    assert callable(mod.validate) and callable(mod.build) and isinstance(mod.TABLES, tuple)
    assert registry.capabilities(kind) <= set(registry.CAPABILITY)


def test_the_log_allow_list_is_the_shipped_kinds_that_run_only_our_code():
    assert "fmu" not in KINDS and "hil.bridge" in KINDS and "testkit.toys" in KINDS
    assert set(KINDS) == {k for k, v in registry.BUILTIN.items() if "from_log" in v.capabilities}


def test_an_unknown_kind_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"kind 'rangefinder': not a service kind \(shipped: orbiter"):
        registry.kind_module("rangefinder")


def test_a_module_missing_the_contract_or_with_a_hook_of_the_wrong_type_is_refused(plugin_path):
    _module(plugin_path, "zz_nobuild", "TABLES = ()\ndef validate(config, name):\n    return []\n")
    with pytest.raises(ConfigError, match=r"module 'zz.zz_nobuild' lacks build"):
        registry.kind_module("zz.zz_nobuild")
    _module(plugin_path, "zz_badports", _MINIMAL + "ports = 3\n")
    with pytest.raises(ConfigError, match=r"module 'zz.zz_badports': ports of the wrong type"):
        registry.kind_module("zz.zz_badports")
    # declared parameters: a frozen dataclass whose every field has its unit
    _module(plugin_path, "zz_badparams", _MINIMAL + textwrap.dedent("""
        from dataclasses import dataclass, field
        @dataclass(frozen=True)
        class P:
            gain: float = field(metadata={})
        PARAMS = P
    """))
    with pytest.raises(ConfigError, match=r"module 'zz.zz_badparams': PARAMS of the wrong type"):
        registry.kind_module("zz.zz_badparams")
    _module(plugin_path, "zz_badcap", _MINIMAL + "CAPABILITIES = {'teleport'}\n")
    with pytest.raises(ConfigError, match=r"unknown CAPABILITIES \['teleport'\]"):
        registry.kind_module("zz.zz_badcap")


RUNTIME_TOPICS = {"sim/control", "sim/stats"}
"""The runtime's own topics: the only ones :mod:`protocol.messages` declares."""


def _outputs_of_default_scenario() -> dict[str, tuple[str, set[str]]]:
    """Service -> (kind, its output topics), from each kind's ``ports`` on the shipped default scenario."""
    config = load(ROOT / "configs" / "srms_berthing.toml")
    out = {}
    for name, svc in config["services"].items():
        mod = registry.kind_module(svc["kind"])
        if hasattr(mod, "ports"):
            out[name] = (svc["kind"], {p.topic for p in mod.ports(config, name).outputs})
    return out


def test_topic_schemas_are_declared_by_their_producers():
    """Every output topic of the default scenario's services is declared in its producer's TOPICS, and only
    there: protocol.messages declares the runtime's topics only, no shipped kind declares a topic it does not
    produce (hil.bridge's ports are read from its module, whose outputs do not depend on the config)."""
    produced: dict[str, str] = {}
    for name, (kind, topics) in _outputs_of_default_scenario().items():
        declared = set(getattr(registry.kind_module(kind), "TOPICS", {}))
        assert topics <= declared, f"{name} ({kind}) produces {sorted(topics - declared)} without declaring them"
        produced.update(dict.fromkeys(topics, kind))
    bridge = registry.kind_module("hil.bridge")
    produced.update(dict.fromkeys((p.topic for p in bridge.OUTPUTS), "hil.bridge"))
    for kind in registry.BUILTIN:
        if kind in ("fmu", "testkit.toys"):
            continue  # the FMU's topics come from its config (schemas hook); the toys are the tests' own
        for topic in getattr(registry.kind_module(kind), "TOPICS", {}):
            assert produced.get(topic) == kind, f"{kind} declares {topic!r}, which it does not produce"
            assert registry.producer(topic) == kind and registry.producer(topic + "/full") == kind
    assert len(produced) >= 11
    # in a fresh process, before any kind is imported, the runtime declares its own topics only
    r = subprocess.run([sys.executable, "-c", "import protocol.messages as m, sys; "
                        "print(sorted(m._TABLE)); print(sorted(k for k in sys.modules if k.startswith('services')))"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    table, services = r.stdout.splitlines()
    assert set(ast.literal_eval(table)) == RUNTIME_TOPICS and ast.literal_eval(services) == []


def test_a_tool_decodes_a_shipped_topic_without_a_config():
    """A process that imported no kind learns the producers' schemas on its first unknown topic."""
    code = ("from protocol import codec; from protocol.messages import schema_for; "
            "s = schema_for('arm/state'); b = codec.encode('payload/state/full', "
            "{'p_WoTo_W': [0.0]*3, 'quat_WT': [1.0, 0, 0, 0], 'w_WT_T': [0.0]*3, 'v_WTo_W': [0.0]*3, "
            "'a_WTo_W': [0.0]*3, 'wdot_WT_T': [0.0]*3, 'grappled': False, 'berthed': True}, "
            "sender='x', seq=0, t_ns=1, h_ns=1); "
            "print(s.name, s.version, codec.decode('payload/state/full', b).body['berthed'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["berthsim.ArmState", "3", "True"]


def test_a_topic_declared_differently_by_two_kinds_is_refused_naming_both(plugin_path):
    _module(plugin_path, "zz_clash", _MINIMAL + textwrap.dedent("""
        from protocol.messages import TopicSchema, f8
        TOPICS = {"arm/state": TopicSchema("zz.ArmState", 1, "state", {"q": f8(6)})}
    """))
    registry.kind_module("arm")
    with pytest.raises(ConfigError, match=r"kind 'zz.zz_clash': topic 'arm/state': declared as zz.ArmState v1, "
                                          r"but 'arm' declares it as berthsim.ArmState v3"):
        registry.kind_module("zz.zz_clash")
    assert registry.producer("arm/state") == "arm"
    _module(plugin_path, "zz_notschema", _MINIMAL + "TOPICS = {'zz/x': ('f8', ())}\n")
    with pytest.raises(ConfigError, match=r"TOPICS\['zz/x'\] must map a topic to a protocol.messages.TopicSchema"):
        registry.kind_module("zz.zz_notschema")


def test_capabilities_of_a_plugin_come_from_its_module_and_from_log_is_never_granted(plugin_path):
    _module(plugin_path, "zz_rig", _MINIMAL + "CAPABILITIES = frozenset({'device', 'from_log'})\n")
    assert registry.capabilities("zz.zz_rig") == {"device"}
    assert registry.capabilities("hil.bridge") >= {"device", "from_log"}
    assert "device" not in registry.capabilities("contact")


_SHARED = textwrap.dedent("""
    import threading
    ready = threading.Event()   # set by the model's build, waited for by the device's
    closed = []
""")


def test_a_device_builds_while_the_models_build_and_the_objects_keep_the_members_order(plugin_path):
    """The device's build (first in the order) waits for something only a model's build does: built one after
    the other, it would time out."""
    _module(plugin_path, "zz_shared", _SHARED)
    _module(plugin_path, "zz_dev", _MINIMAL.replace("return None", "from zz.zz_shared import ready\n"
                                                    "    if not ready.wait(5.0):\n"
                                                    "        raise TimeoutError('the model was not built meanwhile')\n"
                                                    "    return ('device', name)")
            + "CAPABILITIES = {'device'}\n")
    _module(plugin_path, "zz_model", _MINIMAL.replace("return None", "from zz.zz_shared import ready\n"
                                                      "    ready.set()\n"
                                                      "    return ('model', name, period_ns)"))
    got = registry.build_members({}, [("rig", "zz.zz_dev", 1), ("a", "zz.zz_model", 5), ("b", "zz.zz_model", 7)])
    assert got == [("device", "rig"), ("model", "a", 5), ("model", "b", 7)]


def test_a_failed_build_names_its_member_builds_no_model_after_it_and_closes_what_was_built(plugin_path):
    _module(plugin_path, "zz_shared", _SHARED)
    closing = textwrap.dedent("""
        class Built:
            def __init__(self, name):
                self.name = name
            def close(self):
                from zz.zz_shared import closed
                closed.append(self.name)
    """)
    _module(plugin_path, "zz_ok", _MINIMAL.replace("return None", "return Built(name)") + closing)
    _module(plugin_path, "zz_dev", _MINIMAL.replace("return None", "return Built(name)") + closing
            + "CAPABILITIES = {'device'}\n")
    _module(plugin_path, "zz_bad", _MINIMAL.replace("return None", "raise ValueError('mass: -1 kg')"))
    with pytest.raises(registry.BuildFailed, match=r"build of 'b' failed: ValueError: mass: -1 kg") as err:
        registry.build_members({}, [("a", "zz.zz_ok", 1), ("b", "zz.zz_bad", 1), ("rig", "zz.zz_dev", 1),
                                    ("c", "zz.zz_ok", 1)])
    assert err.value.service == "b" and isinstance(err.value.error, ValueError)
    from zz.zz_shared import closed  # type: ignore[import-not-found]
    assert sorted(closed) == ["a", "rig"]  # "c" never built


def test_an_installed_entry_point_adds_a_kind_by_name(plugin_path):
    (plugin_path / "zz_sensor.py").write_text(_MINIMAL)
    dist = plugin_path / "zz_sensor-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: zz-sensor\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[berthsim.kinds]\nzz_sensor = zz_sensor\norbiter = zz_sensor\n")
    k = registry.kinds()
    assert k["zz_sensor"].module == "zz_sensor" and k["zz_sensor"].origin == "entry point zz-sensor"
    assert k["orbiter"].module == "services.orbiter"  # a plug-in does not replace a shipped kind
    assert registry.kind_module("zz_sensor").__name__ == "zz_sensor"


def test_a_device_kind_gets_the_highest_priority_whatever_its_rate(plugin_path):
    """Realtime priorities ask the registry for ``device``, not for the name ``hil.bridge``."""
    _module(plugin_path, "zz_dev", """
        from protocol.service import ServicePorts
        TABLES = ()
        CAPABILITIES = {"device"}
        def validate(config, name):
            return []
        def ports(config, name):
            return ServicePorts("model", (), ())
        def build(config, name, period_ns):
            return None
    """)
    cfg = {"sim": {"mode": "realtime", "duration": 1.0, "rt_priority": 10},
           "services": {"fast": {"kind": "zz.zz_dev", "rate_hz": 1000}, "slow": {"kind": "zz.zz_dev", "rate_hz": 10}}}
    base = priorities(validate(cfg))
    (plugin_path / "zz" / "zz_plain.py").write_text(
        (plugin_path / "zz" / "zz_dev.py").read_text().replace('{"device"}', "set()"))
    for svc in cfg["services"].values():
        svc["kind"] = "zz.zz_plain"
    plain = priorities(validate(cfg))
    assert base["slow"] == base["fast"]    # both devices: the rig's place, whatever the rate
    assert plain["slow"] < plain["fast"]   # not a device: rate-monotonic


def _docs_example() -> tuple[str, str]:
    """The kind module and the config entry of docs/extending.md's worked example, as written there."""
    text = (ROOT / "docs" / "extending.md").read_text()
    part = text[text.index("### The example: a laser rangefinder"):]
    code = re.search(r"```python\n(.*?)```", part, re.S)
    toml = re.search(r"```toml\n(\[services\.range\].*?)```", part, re.S)
    assert code and toml
    return code.group(1), toml.group(1)


def test_the_docs_worked_example_is_one_file_and_one_config_entry(tmp_path, monkeypatch):
    """A new kind from docs/extending.md alone: its module in a new package, its entry in the default scenario;
    the run checks, runs, and logs ``sensor/range`` equal to the logged bodies' range plus the bias."""
    module, entry = _docs_example()
    assert len(module.splitlines()) < 100
    pkg = tmp_path / "plugins" / "acme_rig"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rangefinder.py").write_text(module)
    cfg = tmp_path / "scenario.toml"
    cfg.write_text((ROOT / "configs" / "srms_berthing.toml").read_text() + "\n" + entry)
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path / 'plugins'}", "BERTHSIM_NO_PROGRESS": "1", "PATH": "/usr/bin:/bin"}
    log = tmp_path / "run.mcap"
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "check", str(cfg)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(cfg), "--duration", "2", "--log",
                        str(log), "--no-report", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads([x for x in r.stdout.splitlines() if x.startswith("{")][-1])
    assert summary["services"]["range"]["steps"] == 100  # 2 s at 50 Hz
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    register_schemas(load(cfg))  # as a reader of the log does: the kind's module registers its topic
    bias = load(cfg)["rangefinder"]["bias_m"]
    states: dict[str, dict[int, dict]] = {"orbiter/state": {}, "payload/state": {}}
    ranges = []
    for m in open_log(log).messages():
        if m.topic in states:
            states[m.topic][m.t_ns] = decode(m.topic, m.payload).body
        elif m.topic == "sensor/range":
            ranges.append((m.t_ns, decode(m.topic, m.payload).body))
    assert len(ranges) == 101
    checked = 0
    for t_ns, body in ranges[1:]:
        t0 = t_ns - 20_000_000  # the step's start: the latest samples (orbiter at 100 Hz, payload at 1 kHz)
        o, p = states["orbiter/state"].get(t0), states["payload/state"].get(t0)
        if o is None or p is None:
            continue
        d = np.asarray(p["p_WoTo_W"]) - np.asarray(o["p_WoOo_W"])
        v = np.asarray(p["v_WTo_W"]) - np.asarray(o["v_WOo_W"])
        assert body["valid"] and math.isclose(body["range_m"], np.linalg.norm(d) + bias, rel_tol=0, abs_tol=1e-9)
        assert math.isclose(body["range_rate_mps"], d @ v / np.linalg.norm(d), rel_tol=0, abs_tol=1e-9)
        checked += 1
    assert checked >= 90


def test_another_kinds_table_is_read_with_its_owners_keys_and_defaults():
    from protocol.config import table_values
    owner, keys = registry.table_keys("orbiter")
    assert owner == "orbiter" and keys is registry.kind_module("orbiter").TABLE_KEYS["orbiter"]
    assert registry.table_keys("payload")[0] == "contact"
    orb = table_values({"orbiter": {"mass": 9.0e4}}, "orbiter")
    assert orb["mass"] == 9.0e4 and orb["X_OL"] == keys["X_OL"][1] and set(orb) == set(keys)
    with pytest.raises(ConfigError, match=r"\[nosuch\]: no service kind declares this table"):
        table_values({}, "nosuch")


def test_no_service_reads_another_kinds_table_by_hand():
    """A service module (and the hil bridge) reads only its own tables (TABLE_KEYS) and the runtime's by indexing the
    config; another kind's table goes through protocol.config.table_values (its owner's keys and defaults, no copy)."""
    import ast
    runtime = {"sim", "services", "security"}
    owned = {t for k in registry.BUILTIN if k != "fmu" for t in getattr(registry.kind_module(k), "TABLE_KEYS", {})}
    bad = []
    paths = [*sorted((ROOT / "services").glob("*.py")), ROOT / "hil" / "bridge.py"]
    for path in paths:
        kind = "hil.bridge" if path.parent.name == "hil" else path.stem
        own = set(getattr(registry.kind_module(kind), "TABLE_KEYS", {})) if kind in registry.BUILTIN else set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            key = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("config", "cfg") and node.args:
                key = node.args[0]
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("config", "cfg"):
                key = node.slice
            if isinstance(key, ast.Constant) and key.value in owned - own - runtime:
                bad.append(f"{path.name}:{node.lineno}: [{key.value}]")
    assert not bad, bad


def test_no_runtime_or_tool_module_tests_a_kind_by_name():
    """What a service may do follows from its kind's capabilities (registry.capabilities), never from comparing
    its ``kind`` with a shipped kind's name outside the registry (a kind's module may look for services of its own
    kind)."""
    import ast
    names = set(registry.BUILTIN)
    bad = []
    dirs = ("protocol", "services", "hil", "tools")
    paths = [ROOT / "launch.py", *sorted(p for d in dirs for p in (ROOT / d).glob("*.py") if p.name != "registry.py")]
    def is_kind(x: ast.expr) -> bool:  # x.kind, kind, or x.get("kind")
        return ((isinstance(x, ast.Attribute) and x.attr == "kind") or (isinstance(x, ast.Name) and x.id == "kind")
                or (isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr == "get"
                    and bool(x.args) and isinstance(x.args[0], ast.Constant) and x.args[0].value == "kind"))

    for path in paths:
        own = {"hil.bridge" if path.parent.name == "hil" and path.stem == "bridge" else path.stem}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            kind_side = any(is_kind(x) for x in sides)
            consts = {x.value for x in sides if isinstance(x, ast.Constant)}
            for x in sides:
                if isinstance(x, (ast.Tuple, ast.List, ast.Set)):
                    consts |= {e.value for e in x.elts if isinstance(e, ast.Constant)}
            if kind_side and consts & (names - own):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad
