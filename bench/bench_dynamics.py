"""Per-call microseconds of the chain dynamics beside Pinocchio's, printed as JSON.

Models: the SRMS on an orbiter base (6 + 6 DOF, ``dynamics.cases.srms_on_orbiter``) and a
12-joint free-floating chain (6 + 12 DOF, written here as URDF so both libraries read
the same file). Functions: forward dynamics (Saha UDU^T, and the dense Cholesky path),
mass matrix, J*, G*; the compiled kernels (``dynamics.chain_kernels``) beside the numpy reference
they replace (``forward_dynamics_numpy``, ``mass_matrix_numpy``: the A/B in one run). Pinocchio's figures:
``aba``, ``crba``, and for J*/G* the same formulas composed from Pinocchio's
``crba``, joint Jacobian and ``computeCentroidalMap`` / ``computeMinverse`` in Python.
Every call sees a new configuration (ours caches kinematics per q). Figures are CPU
time per call (``time.process_time``), best of the repeats; ours and Pinocchio's are timed
interleaved (one batch each per repeat), so that their ratio holds on a loaded machine.

Part ``compile``: the kernels' first use in a fresh process (``make_data``, which loads them)
with an empty numba cache (the compile, paid once per machine and cache directory) and again
with the cache filled (what every later process pays), and each whole process's wall time
beside a process that does not use them.

Part ``flexible``: forward dynamics per call of the SRMS with rigid booms against the same
arm with its booms as beam links (``dynamics.cases.srms_booms``, N modes per bending plane,
6 + 6 + 4N coordinates), and the closed chain's solve for the latched-and-grappled payload.

Run from the repository root: ``python bench/bench_dynamics.py [--repeat N] [--parts rigid,flexible]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import timeit
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pinocchio as pin  # noqa: E402

from dynamics import cases, exgit  # noqa: E402
from dynamics import chain as ch  # noqa: E402
from dynamics.urdf import chain_from_urdf_string  # noqa: E402
from testkit.pin_oracle import pin_from_urdf, pin_q, sym_upper  # noqa: E402


def chain12_urdf(seed: int = 12) -> str:
    """A 12-joint serial chain with random axes, offsets and inertias (deterministic)."""
    rng = np.random.default_rng(seed)
    parts = ['<robot name="chain12">']

    def link(name: str, mass: float) -> str:
        d = rng.uniform(0.05, 0.5, 3)
        xyz = " ".join(f"{x:.6f}" for x in rng.uniform(-0.3, 0.3, 3))
        return (f'<link name="{name}"><inertial><origin xyz="{xyz}" rpy="0 0 0"/><mass value="{mass:.4f}"/>'
                f'<inertia ixx="{d[0]:.6f}" iyy="{d[1]:.6f}" izz="{d[2]:.6f}" ixy="0" ixz="0" iyz="0"/>'
                f"</inertial></link>")

    parts.append(link("base", 500.0))
    prev = "base"
    for j in range(12):
        name = f"l{j + 1}"
        parts.append(link(name, float(rng.uniform(2.0, 30.0))))
        xyz = " ".join(f"{x:.6f}" for x in rng.uniform(-0.8, 0.8, 3))
        rpy = " ".join(f"{x:.6f}" for x in rng.uniform(-np.pi, np.pi, 3))
        ax = rng.normal(size=3)
        ax /= np.linalg.norm(ax)
        jt = "prismatic" if j % 5 == 4 else "revolute"
        parts.append(f'<joint name="j{j + 1}" type="{jt}"><parent link="{prev}"/><child link="{name}"/>'
                     f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{ax[0]:.6f} {ax[1]:.6f} {ax[2]:.6f}"/>'
                     f'<limit lower="-3" upper="3" effort="100" velocity="1"/></joint>')
        prev = name
    parts.append("</robot>")
    return "\n".join(parts)


def _per_call_us(fn, repeat: int, number: int) -> float:
    """CPU time per call [µs], best of ``repeat`` (process time: robust on a shared machine)."""
    return min(timeit.repeat(fn, repeat=repeat, number=number, timer=time.process_time)) / number * 1e6


def _interleaved_us(fns: list, repeat: int, number: int) -> list[float]:
    """CPU time per call [µs] of each of ``fns``, best of ``repeat`` rounds that time every function once
    in turn (so that a change of the machine's load affects all of them alike)."""
    best = [float("inf")] * len(fns)
    timers = [timeit.Timer(fn, timer=time.process_time) for fn in fns]
    for _ in range(repeat):
        for i, t in enumerate(timers):
            best[i] = min(best[i], t.timeit(number))
    return [b / number * 1e6 for b in best]


def bench_model(label: str, model: ch.ChainModel, pm: pin.Model, hand_body: int, p_hand: np.ndarray,
                q0: np.ndarray, repeat: int, number: int) -> list[dict]:
    rng = np.random.default_rng(1)
    data = ch.make_data(model)
    pd = pm.createData()
    qs = []
    for _ in range(16):
        q = q0.copy()
        q[7:] += rng.normal(scale=0.2, size=model.n)
        qs.append(q)
    qps = [pin_q(pm, model, q) for q in qs]
    v = rng.normal(scale=0.05, size=model.nv)
    tau = np.concatenate([np.zeros(6), rng.normal(size=model.n)])
    jid = pm.getJointId(model.joint_names[hand_body - 1])
    p_hand = np.asarray(p_hand, dtype=float)
    k = [0]

    def nxt() -> int:
        k[0] = (k[0] + 1) % len(qs)
        return k[0]

    def ours_fd():
        ch.forward_dynamics(model, data, qs[nxt()], v, tau)

    def ours_fd_numpy():
        ch.forward_dynamics_numpy(model, data, qs[nxt()], v, tau)

    def ours_M_numpy():
        ch.mass_matrix_numpy(model, data, qs[nxt()])

    def ours_fd_dense():
        ch.forward_dynamics_dense(model, data, qs[nxt()], v, tau)

    def ours_M():
        ch.mass_matrix(model, data, qs[nxt()])

    def ours_Js():
        exgit.generalized_jacobian(model, data, qs[nxt()], hand_body, p_hand)

    def ours_G():
        exgit.exgit(model, data, qs[nxt()], hand_body, p_hand, mu=0.5)

    def pin_fd():
        pin.aba(pm, pd, qps[nxt()], v, tau)

    def pin_M():
        pin.crba(pm, pd, qps[nxt()])

    def _pin_parts(qp):
        M = sym_upper(pin.crba(pm, pd, qp))
        pin.computeJointJacobians(pm, pd, qp)
        J = pin.getJointJacobian(pm, pd, jid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        r = pd.oMi[jid].rotation @ p_hand
        J[:3] += np.cross(J[3:].T, r).T
        X = np.linalg.solve(M[:6, :6], M[:6, 6:])
        return M, J, X

    def pin_Js():
        qp = qps[nxt()]
        _, J, X = _pin_parts(qp)
        return J[:, 6:] - J[:, :6] @ X

    def pin_G():
        qp = qps[nxt()]
        M, J, X = _pin_parts(qp)
        Js = J[:, 6:] - J[:, :6] @ X
        Hs = M[6:, 6:] - M[:6, 6:].T @ X
        return Js @ np.linalg.solve(Hs, 0.5 * Js.T) + J[:, :6] @ np.linalg.solve(M[:6, :6], J[:, :6].T)

    ours_fd()  # the kernels' first call (compile or cache load) outside the timing
    rows = []
    for name, ours, theirs, note in (
        ("forward_dynamics", ours_fd, pin_fd, "pin.aba"),
        ("forward_dynamics_numpy", ours_fd_numpy, pin_fd, "pin.aba"),
        ("forward_dynamics_dense", ours_fd_dense, pin_fd, "pin.aba"),
        ("mass_matrix", ours_M, pin_M, "pin.crba"),
        ("mass_matrix_numpy", ours_M_numpy, pin_M, "pin.crba"),
        ("J*", ours_Js, pin_Js, "pin.crba + getJointJacobian + numpy"),
        ("G*", ours_G, pin_G, "pin.crba + getJointJacobian + numpy"),
    ):
        t_ours, t_pin = _interleaved_us([ours, theirs], repeat, number)
        rows.append({"model": label, "nv": model.nv, "function": name, "berthsim_us": round(t_ours, 2),
                     "pinocchio_us": round(t_pin, 2), "ratio": round(t_ours / t_pin, 1), "pinocchio_call": note})
    return rows


def _cycling(fn, qs: list) -> object:
    """A no-argument callable that calls ``fn(q)`` with the next configuration of ``qs`` each time."""
    k = [0]

    def call() -> None:
        k[0] = (k[0] + 1) % len(qs)
        fn(qs[k[0]])

    return call


def bench_flexible(repeat: int, number: int, modes: tuple[int, ...] = (0, 1, 2, 3)) -> list[dict]:
    """Forward dynamics per call of the SRMS on the orbiter with rigid booms (Saha's O(n) solve)
    and with flexible booms (:func:`dynamics.cases.srms_booms`, N modes per bending plane:
    6 + 6 + 4N coordinates, dense Cholesky); and the closed chain's (latched payload) solve."""
    import tomllib

    from dynamics import closed_chain as cc

    base = cases.srms_on_orbiter()
    rng = np.random.default_rng(2)
    rows = []
    for N in modes:
        model = base.model if N == 0 else cases.with_flexible_booms(base.model, cases.srms_booms(N))
        data = ch.make_data(model)
        qs = []
        for _ in range(16):
            q = np.concatenate([base.q, np.zeros(model.ne)])
            q[7:13] += rng.normal(scale=0.2, size=6)
            q[13:] = rng.normal(scale=1e-3, size=model.ne)
            qs.append(q)
        v = rng.normal(scale=0.05, size=model.nv)
        tau = np.concatenate([np.zeros(6), rng.normal(size=6), np.zeros(model.ne)])
        fd = partial(ch.forward_dynamics, model, data)
        t_fd = _per_call_us(_cycling(lambda q, fd=fd, v=v, tau=tau: fd(q, v, tau), qs), repeat, number)
        t_M = _per_call_us(_cycling(partial(ch.mass_matrix, model, data), qs), repeat, number)
        t_same_q = _per_call_us(_cycling(lambda q, fd=fd, v=v, tau=tau: fd(q, v, tau), qs[:1]), repeat, number)
        rows.append({"model": f"SRMS on orbiter, booms {'rigid' if N == 0 else f'{N} mode(s) per plane'}",
                     "nv": model.nv, "forward_dynamics_us": round(t_fd, 1), "mass_matrix_us": round(t_M, 1),
                     "forward_dynamics_same_q_us": round(t_same_q, 1)})
    cfg = tomllib.loads((Path(__file__).resolve().parents[1] / "configs" / "srms_berthing.toml").read_text())
    for N in (0, 1, 2):
        case, loop = cases.srms_latched_and_grappled(
            payload_mass=cfg["payload"]["mass"], payload_inertia_T=cfg["payload"]["inertia"],
            X_TG=cfg["payload"]["X_TG"], X_TB=cfg["payload"]["X_TB"], X_OL=cfg["orbiter"]["X_OL"],
            X_OS=ch.pose_xyz_rpy(cfg["arm"]["p_OoSo_O"], cfg["arm"]["rpy_OS"]),
            theta_guess=np.array(cfg["arm"]["q0"]), booms=None if N == 0 else cases.srms_booms(N))
        model, data = case.model, ch.make_data(case.model)
        qs = [case.q + np.concatenate([np.zeros(7), rng.normal(scale=1e-4, size=model.nq - 7)]) for _ in range(16)]
        v = rng.normal(scale=0.01, size=model.nv)
        solve = partial(cc.forward_dynamics, model, data)
        t_cc = _per_call_us(_cycling(lambda q, s=solve, v=v, lp=loop: s(q, v, np.zeros(v.size), lp), qs),
                            repeat, number)
        rows.append({"model": f"latched and grappled (closed chain), booms {'rigid' if N == 0 else f'{N} mode(s)'}",
                     "nv": model.nv, "closed_chain_forward_dynamics_us": round(t_cc, 1)})
    return rows


_FIRST_CALL = """
import time, numpy as np
from dynamics import cases, chain as ch
c = cases.srms_on_orbiter()
t0 = time.perf_counter()
if CALL:  # make_data loads (or compiles) the kernels, numba's import included
    d = ch.make_data(c.model)
    ch.forward_dynamics(c.model, d, c.q, np.zeros(c.model.nv), np.zeros(c.model.nv))
    ch.mass_matrix(c.model, d, c.q)
print(time.perf_counter() - t0)
"""


def first_call_rows(code: str, key: str) -> list[dict]:
    """Wall time of a numba kernel's first use in fresh processes: ``code`` (with ``CALL`` a bool: whether to
    call) prints the seconds the call took; run with no call, then with an empty numba cache (the compile),
    then with the cache it left (the load). One row each, ``key`` naming the case, with the whole process's
    wall time."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[1]
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label, call in (("no call (reference)", False), ("empty cache (compile)", True),
                            ("filled cache (load)", True)):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", code.replace("CALL", str(call))], cwd=root, env=env,
                                 capture_output=True, text=True, check=True)
            rows.append({key: label, "first_call_s": round(float(out.stdout.split()[-1]), 3),
                         "process_wall_s": round(time.perf_counter() - t0, 3)})
    return rows


def bench_compile() -> list[dict]:
    """Wall time of the kernels' first use in a fresh process (``make_data`` and a call: numba's import
    and the kernels' loading): with an empty numba cache (the compile), then with the cache it left
    (the load); and each process's total beside one that makes no call."""
    return first_call_rows(_FIRST_CALL, "kernels_first_call")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--parts", default="rigid,flexible,compile",
                    help="comma-separated: rigid (vs Pinocchio), flexible, compile")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))

    srms = cases.srms_on_orbiter()
    pm_srms = pin_from_urdf(cases.reference_path("SRMS_Canadarm.urdf"), base_mass=cases.ORBITER_MASS,
                            base_com=cases.SRMS_BASE_TO_ORBITER_COM, base_inertia=cases.ORBITER_INERTIA)
    text = chain12_urdf()
    m12 = chain_from_urdf_string(text)
    pm12 = pin.buildModelFromXML(text, pin.JointModelFreeFlyer())
    pm12.gravity = pin.Motion.Zero()
    q12 = ch.neutral(m12)

    rows = []
    if "rigid" in parts:
        rows += bench_model("SRMS on orbiter (6+6)", srms.model, pm_srms, srms.hand_body, srms.p_BoHo_B, srms.q,
                            args.repeat, args.number)
        rows += bench_model("12-joint chain (6+12)", m12, pm12, m12.nb - 1, np.zeros(3), q12, args.repeat,
                            args.number)
    if "flexible" in parts:
        rows += bench_flexible(args.repeat, args.number)
    if "compile" in parts:
        rows += bench_compile()
    print(json.dumps({"python": platform.python_version(), "numpy": np.__version__, "pinocchio": pin.__version__,
                      "load_average_1min": round(os.getloadavg()[0], 2), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
