"""The FMU host (``kind = "fmu"``, services/fmu.py) and the FMU export (tools/fmu_export.py).

Every FMU is built here, into the test's temporary directory: the example actuator leg from its
pythonfmu source (configs/examples/fmu/actuator_leg.py) with ``pythonfmu build``, and berthsim's
own models with ``launch.py fmu export``. References are independent of the host: the servo's
ODE integrated by scipy, and the lockstep run's own logged outputs for the exported models
(the FMU, driven by FMPy with the inputs that run handed the model, must give them back).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import msgpack
import numpy as np
import pytest
from fmpy import read_model_description, simulate_fmu
from fmpy.fmi2 import FMU2Slave
from fmpy.validation import validate_fmu
from scipy.integrate import solve_ivp

import launch
from errors import LifecycleError
from protocol.codec import decode
from protocol.config import load, service_module, validate
from protocol.logfile import open_log
from protocol.scheduler import advance, simulate, snapshot, start
from tests.compare_logs import differences

ROOT = Path(__file__).resolve().parents[2]
LEG_SOURCE = ROOT / "configs" / "examples" / "fmu" / "actuator_leg.py"
M, K, C = 5.0, 2.0e4, 440.0  # the example config's servo (start values) and the FMU's mass default


def _build_leg(dest: Path, *options: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pythonfmu", "build", "-f", str(LEG_SOURCE), "-d", str(dest), *options],
                   check=True, capture_output=True, cwd=dest)
    return dest / "ActuatorLeg.fmu"


@pytest.fixture(scope="module")
def legs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The leg FMU built twice: ``"plain"`` (pythonfmu's defaults: it cannot save its state) and
    ``"stateful"`` (``--handle-state --serialize-state``)."""
    base = tmp_path_factory.mktemp("legs")
    return {"plain": _build_leg(base / "plain"), "stateful": _build_leg(base / "stateful", "--handle-state",
                                                                        "--serialize-state")}


def _config(fmu: Path, *, duration: float = 1.0, inputs: str = '{x_cmd = "toy/state1:x"}',
            outputs: str = '{topic = "rig/actuator"}', start: str = "{x0 = 1.1, k = 2.0e4, c = 440.0}",
            rate_hz: int = 1000, processes: str = '{rig = ["leg", "logger"]}', logger: bool = True) -> str:
    """The example's scenario (configs/examples/fmu_actuator.toml) with the given values."""
    text = f"""
[sim]
mode = "lockstep"
duration = {duration}
transport = "ipc"
{"processes = " + processes if processes else ""}

[services.a]
kind = "testkit.toys"
rate_hz = 1000
index = 0

[services.b]
kind = "testkit.toys"
rate_hz = 100
index = 1

[services.leg]
kind = "fmu"
rate_hz = {rate_hz}
fmu = "{fmu.name}"
inputs = {inputs}
outputs = {outputs}
start = {start}

[toy]
mass = [1.0, 4.0]
k = [40.0]
rest = [1.0]
x0 = [0.0, 1.1]
v0 = [0.3, -0.2]
"""
    if logger:
        text += "\n[services.logger]\nkind = \"logger\"\nrate_hz = 1000\n"
    return text


def _write(tmp_path: Path, fmu: Path, name: str = "leg.toml", **kw: object) -> Path:
    """The config beside a copy of the FMU (its ``fmu`` path relative to the config file)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    if fmu != tmp_path / fmu.name:
        shutil.copy(fmu, tmp_path / fmu.name)
    path = tmp_path / name
    path.write_text(_config(tmp_path / fmu.name, **kw))  # type: ignore[arg-type]
    return path


def _plan(path: Path):  # noqa: ANN202 - a RunPlan
    return validate(load(path), path=path, overrides={"config_file": str(path.resolve())})


def _models(plan) -> list:  # noqa: ANN001
    return [service_module(s.kind).build(plan.config, n, s.period_ns) for n, s in plan.services.items()
            if s.kind != "logger"]


def _coupling(plan) -> dict:  # noqa: ANN001
    return {n: s.coupling_ns for n, s in plan.services.items() if s.coupling_ns}


def _patched(fmu: Path, dest: Path, edit) -> Path:  # noqa: ANN001
    """A copy of ``fmu`` whose modelDescription.xml is ``edit(text)``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(fmu) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "modelDescription.xml":
                data = edit(data.decode()).encode()
            zout.writestr(info, data)
    return dest


def _check_line(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = launch.main(["check", str(path)])
    return code, capsys.readouterr().err


# ---------------------------------------------------------------- check
@pytest.mark.parametrize("change, expected", [
    ({"inputs": '{nope = "toy/state1:x"}'}, "services.leg.inputs.nope: the FMU 'ActuatorLeg.fmu' has no variable "
                                            "'nope'"),
    ({"inputs": '{x = "toy/state1:x"}'}, "services.leg.inputs.x: variable 'x' has causality 'output', not 'input'"),
    ({"inputs": '{x_cmd = "toy/spring0:x"}'}, "services.leg.inputs.x_cmd: 'toy/spring0:x' is not a scalar"),
    ({"inputs": '{x_cmd = "toy/event0:events"}'}, "services.leg.inputs.x_cmd: topic 'toy/event0' is an event topic"),
    ({"outputs": '{topic = "rig/actuator", variables = ["x", "k"]}'},
     "services.leg.outputs.variables: variable 'k' has causality 'parameter', not 'output'"),
    ({"outputs": '{topic = "contact/wrench"}'}, "services.leg.outputs.topic: 'contact/wrench' is a topic of "
                                                "berthsim's own schema"),
    ({"start": "{x = 1.0}"}, "services.leg.start.x: variable 'x' (causality 'output', variability 'continuous') "
                             "takes no start value"),
    ({"start": '{k = "stiff"}'}, "services.leg.start.k: variable 'k' is Real, got 'stiff'"),
])
def test_check_refuses_naming_the_key_and_variable(legs: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str], change: dict,
                                                   expected: str) -> None:
    code, err = _check_line(_write(tmp_path, legs["plain"], **change), capsys)
    assert code == 2
    assert expected in err, err


def test_check_reads_the_model_description(legs: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """An input's variability, a fixed step, model exchange only, a missing file: each refused
    naming the key (the FMU's description edited, its binary untouched); the unedited FMU passes."""
    ok = _write(tmp_path / "ok", legs["plain"])
    assert _check_line(ok, capsys)[0] == 0
    fixed = _patched(legs["plain"], tmp_path / "fixed" / "ActuatorLeg.fmu",
                     lambda t: t.replace('canHandleVariableCommunicationStepSize="true"',
                                         'canHandleVariableCommunicationStepSize="false"'))
    assert _check_line(_write(tmp_path / "fixed", fixed), capsys)[0] == 0  # its fixed step 1 ms is the service's
    code, err = _check_line(_write(tmp_path / "fixed", fixed, name="slow.toml", rate_hz=500), capsys)
    assert code == 2 and "services.leg.rate_hz: the FMU 'ActuatorLeg.fmu' takes only its fixed step 0.001 s" in err
    tunable = _patched(legs["plain"], tmp_path / "tunable" / "ActuatorLeg.fmu",
                       lambda t: re.sub(r'(name="x_cmd"[^>]*)>', r'\1 variability="tunable">', t, count=1))
    code, err = _check_line(_write(tmp_path / "tunable", tunable), capsys)
    # FMPy itself refuses the combination when it reads the description; the line names the key and variable
    assert code == 2 and "services.leg.fmu:" in err and 'Variable "x_cmd"' in err and 'variability="tunable"' in err
    me = _patched(legs["plain"], tmp_path / "me" / "ActuatorLeg.fmu",
                  lambda t: t.replace("<CoSimulation", "<ModelExchange"))
    code, err = _check_line(_write(tmp_path / "me", me), capsys)
    assert code == 2 and "services.leg.fmu: 'ActuatorLeg.fmu' is a model-exchange-only FMU" in err, err
    missing = tmp_path / "missing.toml"
    missing.write_text(_config(tmp_path / "nowhere.fmu"))
    code, err = _check_line(missing, capsys)
    assert code == 2 and "services.leg.fmu: no file" in err


# ---------------------------------------------------------------- hosting
def _leg_reference(t_cmd: np.ndarray, x_cmd: np.ndarray, t_out: np.ndarray, x0: float) -> np.ndarray:
    """The servo m x'' = k (x_cmd - x) - c x' from rest at x0, x_cmd held from each sample's instant to the
    next, integrated by scipy (DOP853, rtol 1e-12) interval by interval; x at ``t_out``."""
    y = np.array([x0, 0.0])
    out = np.empty(len(t_out))
    for i, (ta, tb) in enumerate(zip(t_out[:-1], t_out[1:], strict=True)):
        if i == 0:
            out[0] = y[0]
        u = x_cmd[np.searchsorted(t_cmd, ta, side="right") - 1]
        sol = solve_ivp(lambda t, s, u=u: [s[1], (K * (u - s[0]) - C * s[1]) / M], (ta, tb), y, method="DOP853",
                        rtol=1e-12, atol=1e-14)
        y = sol.y[:, -1]
        out[i + 1] = y[0]
    return out


def _log_bodies(path: Path, topic: str) -> tuple[np.ndarray, list[dict]]:
    ts, bodies = [], []
    with open_log(path) as log:
        for m in log.messages([topic]):
            env = msgpack.unpackb(m.payload, raw=False)
            ts.append(env[3])
            bodies.append(env[6])
    return np.array(ts), bodies


@pytest.mark.slow
@pytest.mark.integration
def test_lockstep_run_is_deterministic_and_follows_the_servo_law(legs: dict[str, Path], tmp_path: Path) -> None:
    """Two runs of the example's scenario (real processes over ipc, the FMU beside the toy chain) give
    bit-identical logs, the second with the logger in a process of its own (the FMU's topic schema
    registered there from the config); the FMU's outputs are in the log and follow the servo's ODE
    driven by the toy's logged position, held from each sample (mass b's coupling instants every 10 ms)."""
    logs = []
    for k in range(2):
        d = tmp_path / f"layout{k}"
        d.mkdir()
        cfg = _write(d, legs["plain"], **({} if k == 0 else {"processes": ""}))
        log = tmp_path / f"run{k}.mcap"
        r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", str(cfg), "--log", str(log)],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stderr
        logs.append(log)
    assert differences(logs[0], logs[1]) == []
    t_leg, leg = _log_bodies(logs[0], "rig/actuator")
    t_b, b = _log_bodies(logs[0], "toy/state1")
    assert len(leg) == 1001 and set(leg[0]) == {"x", "v", "F"}
    x = np.array([body["x"] for body in leg])
    ref = _leg_reference(t_b * 1e-9, np.array([body["x"] for body in b]), t_leg * 1e-9, 1.1)
    assert np.max(np.abs(x - ref)) < 1e-7, np.max(np.abs(x - ref))
    assert np.ptp(x) > 0.05  # the leg moved: the comparison is not of two constants
    F = np.array([body["F"] for body in leg])
    v = np.array([body["v"] for body in leg])
    x_held = np.array([b[np.searchsorted(t_b, t - 1, side="right") - 1]["x"] for t in t_leg[1:]])
    assert np.allclose(F[1:], K * (x_held - x[1:]) - C * v[1:], rtol=0, atol=1e-9)


def test_snapshot_restores_bit_identically_or_is_refused(legs: dict[str, Path], tmp_path: Path) -> None:
    """A run with the stateful FMU saved at 0.2 s and restored goes on bit-identically to the uninterrupted
    run; a sweep from that snapshot takes another service's parameter and refuses the FMU's start value;
    with pythonfmu's default FMU (no state) the snapshot is refused, naming the service and the flags."""
    plan = _plan(_write(tmp_path / "s", legs["stateful"]))
    whole: list[bytes] = []
    advance(start(_models(plan), coupling=_coupling(plan)), 500_000_000, whole.append)
    parts: list[bytes] = []
    sched = advance(start(_models(plan), coupling=_coupling(plan)), 200_000_000, parts.append)
    from protocol.scheduler import restore
    advance(restore(snapshot(sched)), 500_000_000, parts.append)
    leg = [f for f in whole if f.startswith(b"rig/actuator\0")]
    assert len(leg) == 501 and leg == [f for f in parts if f.startswith(b"rig/actuator\0")]
    # a sweep from that snapshot: a parameter of another service goes onto the restored run; the FMU's start
    # value, which acted in its initialization, is refused
    from tools.sweep import transplant
    restored = restore(snapshot(sched))
    other = _plan(_write(tmp_path / "s", legs["stateful"], name="other.toml"))
    other.config["toy"]["mass"] = [1.5, 4.0]
    assert transplant(restored, plan.config, other.config, _models(plan), _models(other), 200_000_000) == ["a.m"]
    changed = _plan(tmp_path / "s" / "other.toml")
    changed.config["services"]["leg"]["start"]["x0"] = 1.2
    with pytest.raises(LifecycleError, match=r"leg\.instance depends on the parameter .* acts before it"):
        transplant(restored, plan.config, changed.config, _models(plan), _models(changed), 200_000_000)
    plain = _plan(_write(tmp_path / "p", legs["plain"]))
    sched = advance(start(_models(plain), coupling=_coupling(plain)), 200_000_000)
    with pytest.raises(LifecycleError, match=r"services\.leg: the FMU .* cannot save its state "
                                             r"\(canGetAndSetFMUstate false, canSerializeFMUstate false\)"):
        snapshot(sched)


def test_an_fmu_takes_another_fmus_topic(legs: dict[str, Path], tmp_path: Path) -> None:
    """A second leg following the first's position (rig/actuator x), listed before it: check passes, the
    lockstep run gives the second leg the first's output, and the second builds in a fresh interpreter
    (the first's schema registered from the config, not from having validated it there)."""
    cfg = _write(tmp_path, legs["plain"], processes='{rig = ["leg2", "leg", "logger"]}')
    text = cfg.read_text().replace("[services.leg]", """[services.leg2]
kind = "fmu"
rate_hz = 1000
fmu = "ActuatorLeg.fmu"
inputs = {x_cmd = "rig/actuator:x"}
outputs = {topic = "rig/actuator2"}
start = {x0 = 1.1}

[services.leg]""")
    cfg.write_text(text)
    plan = _plan(cfg)
    frames: list[bytes] = []
    simulate(_models(plan), 300_000_000, coupling=_coupling(plan), on_frame=frames.append)
    got = {f[:f.index(b"\0")].decode(): [] for f in frames}
    for f in frames:
        i = f.index(b"\0")
        got[f[:i].decode()].append(decode(f[:i].decode(), f[i + 1:]))
    x1 = np.array([s.body["x"] for s in got["rig/actuator"]])
    x2 = np.array([s.body["x"] for s in got["rig/actuator2"]])
    assert len(x1) == len(x2) == 301 and np.ptp(x1) > 1e-3
    assert np.max(np.abs(x2 - x1)) < np.max(np.abs(x1 - x1[0]))  # it follows (a lagging copy), not stands
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from protocol.config import load, with_overrides; "
            "from services.fmu import build; c = with_overrides(load(sys.argv[2]), {'config_file': sys.argv[2]}); "
            "m = build(c, 'leg2', 1000000); print(m.inputs); m.close()")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT), str(cfg)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "rig/actuator" in r.stdout, r.stderr


def test_realtime_admission_calibrates_it(legs: dict[str, Path], tmp_path: Path) -> None:
    from protocol.realtime import calibrate
    plan = _plan(_write(tmp_path, legs["plain"]))
    cost = calibrate(plan.config, plan.services, seconds=0.1)
    assert set(cost) == {"a", "b", "leg"} and 0 < cost["leg"][0] <= cost["leg"][1]


# ---------------------------------------------------------------- export
def _export(service: str, config: Path, out: Path) -> dict:
    r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "fmu", "export", service, str(config), "-o", str(out)],
                       capture_output=True, text=True, cwd=out.parent, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _fmpy(fmu: Path) -> tuple[FMU2Slave, dict[str, int]]:
    from fmpy import extract
    md = read_model_description(str(fmu))
    slave = FMU2Slave(guid=md.guid, unzipDirectory=extract(str(fmu)), modelIdentifier=md.coSimulation.modelIdentifier,
                      instanceName="test")
    slave.instantiate()
    slave.setupExperiment(startTime=0.0)
    slave.enterInitializationMode()
    slave.exitInitializationMode()
    return slave, {v.name: v.valueReference for v in md.modelVariables}


def _frames(plan, t_end: int, full_rate: tuple[str, ...] = ()) -> dict[str, dict[int, object]]:  # noqa: ANN001
    frames: list[bytes] = []
    simulate(_models(plan), t_end, coupling=_coupling(plan), full_rate=full_rate, on_frame=frames.append)
    out: dict[str, dict[int, object]] = {}
    for f in frames:
        i = f.index(b"\0")
        topic = f[:i].decode()
        s = decode(topic, f[i + 1:])
        out.setdefault(topic, {})[s.t_ns] = s
    return out


def _set_state(slave: FMU2Slave, vr: dict[str, int], prefix: str, sample) -> None:  # noqa: ANN001
    refs, values = [], []
    for field, x in sample.body.items():
        a = np.asarray(x)
        if a.dtype.kind != "f":
            continue
        for idx in np.ndindex(*a.shape):
            name = f"{prefix}.{field}[{','.join(map(str, idx))}]" if a.shape else f"{prefix}.{field}"
            refs.append(vr[name])
            values.append(float(a[idx]))
    refs.append(vr[f"{prefix}.t_s"])
    values.append(sample.t_ns * 1e-9)
    slave.setReal(refs, values)


@pytest.mark.slow
def test_exported_toy_validates_and_reproduces_the_lockstep_run(tmp_path: Path) -> None:
    """Mass a of the two-mass toy as an FMU: fmpy's validation finds nothing, simulate_fmu runs it; driven
    by FMPy with the samples of mass b the lockstep run handed it (the one of b's coupling instant at or
    before each step), it gives the run's toy/state0 and toy/spring0 of every step (log_full_rate) back
    exactly; a state saved through
    FMI and set back replays the same steps."""
    fmu = tmp_path / "toy_a.fmu"
    info = _export("a", ROOT / "configs" / "toy_spring.toml", fmu)
    assert info["inputs"] == 3 and info["outputs"] == 4 and info["step_s"] == 0.001
    assert validate_fmu(str(fmu)) == []
    md = read_model_description(str(fmu))
    assert md.coSimulation.canGetAndSetFMUstate and md.coSimulation.canSerializeFMUstate
    assert "needs Python and berthsim" in (md.description or "")
    assert len(simulate_fmu(str(fmu), stop_time=0.05, step_size=0.001)) == 51
    plan = _plan(ROOT / "configs" / "toy_spring.toml")
    run = _frames(plan, 500_000_000, full_rate=("a",))  # a's every step (its outputs are coupled at 10 ms)
    slave, vr = _fmpy(fmu)
    outs = [vr[n] for n in ("toy.state0.x", "toy.state0.v", "toy.spring0.F", "toy.spring0.x[0]")]
    got, saved, replay = [], None, []
    for t in range(0, 500_000_000, 1_000_000):
        _set_state(slave, vr, "toy.state1", run["toy/state1"][(t // 10_000_000) * 10_000_000])
        slave.doStep(t * 1e-9, 1e-3)
        got.append(slave.getReal(outs))
        if t == 199_000_000:
            saved = slave.getFMUstate()
    state, spring = run["toy/state0/full"], run["toy/spring0/full"]
    want = [[state[t].body["x"], state[t].body["v"], spring[t].body["F"], spring[t].body["x"][0]]
            for t in range(1_000_000, 500_000_001, 1_000_000)]
    assert got == want
    slave.setFMUstate(saved)
    for t in range(200_000_000, 250_000_000, 1_000_000):
        _set_state(slave, vr, "toy.state1", run["toy/state1"][(t // 10_000_000) * 10_000_000])
        slave.doStep(t * 1e-9, 1e-3)
        replay.append(slave.getReal(outs))
    assert replay == got[200:250]
    slave.terminate()
    slave.freeInstance()


@pytest.mark.slow
def test_exported_contact_model_reproduces_the_logged_contact_wrench(tmp_path: Path) -> None:
    """The contact service of configs/examples/contact_berthing.toml as an FMU, driven by FMPy with the
    orbiter states the lockstep run handed it (every 10 ms, with their instants: the model predicts them
    to each 1 ms step), gives back the run's contact/wrench of every step (log_full_rate) to round-off
    over its first second, half of it in berthing contact."""
    cfg = ROOT / "configs" / "examples" / "contact_berthing.toml"
    fmu = tmp_path / "contact.fmu"
    _export("contact", cfg, fmu)
    assert validate_fmu(str(fmu)) == []
    run = _frames(_plan(cfg), 1_000_000_000, full_rate=("contact",))
    wrench = run["contact/wrench/full"]
    assert sum(bool(s.body["active"]) for s in wrench.values()) >= 400  # contact for the second half
    slave, vr = _fmpy(fmu)
    names = [f"contact.wrench.F_Lo_W[{i}]" for i in range(6)] + [f"contact.wrench.p_WoLo_W[{i}]" for i in range(3)]
    refs = [vr[n] for n in names]
    worst, scale = 0.0, 0.0
    for t in range(0, 1_000_000_000, 1_000_000):
        _set_state(slave, vr, "orbiter.state", run["orbiter/state"][(t // 10_000_000) * 10_000_000])
        slave.doStep(t * 1e-9, 1e-3)
        got = np.array(slave.getReal(refs))
        body = wrench[t + 1_000_000].body
        want = np.concatenate([body["F_Lo_W"], body["p_WoLo_W"]])
        worst, scale = max(worst, float(np.max(np.abs(got - want)))), max(scale, float(np.max(np.abs(want))))
        assert slave.getBoolean([vr["contact.wrench.active"]])[0] == body["active"]
    assert scale > 100.0  # N: the contact pushed
    assert worst <= 1e-12 * scale
    slave.terminate()
    slave.freeInstance()
