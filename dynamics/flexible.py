"""Chains with flexible links: the algorithms :mod:`dynamics.chain` runs when a body is a beam.

A :class:`dynamics.chain.ChainModel` whose ``beams`` name a :class:`dynamics.beam.BeamLink`
for some bodies has elastic coordinates η after the joint coordinates::

    q = [base (7 free / 0 fixed), θ (n), η (ne)]      v = [base (6 / 0), θ̇ (n), η̇ (ne)]

η ordered by body, each beam's in the order of :mod:`dynamics.beam`. The public
functions of :mod:`dynamics.chain` (kinematics, Jacobians, mass matrix, bias and
generalized forces, forward and inverse dynamics, momentum, energy) check their input
and call the functions here; nothing here is meant to be called directly except
:func:`elastic_forces`, :func:`potential_energy`, :func:`tip_deflection` and
:func:`beam_points`, re-exported by :mod:`dynamics.chain`.

Formulation
-----------
The model of Cyril, Kim, Ingham, Misra, Jaar (Acta Astronautica 1998, seed 002, §2: the
Lagrange equations of each body, assembled with the natural orthogonal complement) and
of MBDYN's flexible bodies (Quiocho, Huynh, Crues, seed 004 eqs. 5–21), written, as in
:mod:`dynamics.chain`, with every spatial quantity referred to the base origin ``Bo`` at
the current instant and expressed in W:

- A beam body B moves its own mass elements (:mod:`dynamics.beam`) by
  ``v_i = v_B(r_i) + Σ_k t_ik η̇_k`` (eq. 5: rigid motion plus ``φ q̇``) and spins them
  by ``ω_i = ω_B + e_x χ_i·η̇``. The term ``2ω × φ q̇`` that MBDYN drops (eq. 6) is
  kept: with it the equations are the exact Lagrange equations of the discretized
  model, which conserve energy and momentum.
- The children of a beam hang on its tip frame, reached from B by one translation
  and three rotations about body-fixed axes (:func:`dynamics.beam.tip_transform`), so
  the motion of every descendant is ``Σ_l S_l v_l`` over the joint and elastic columns
  ``S_l`` on its path, as for rigid joints (eq. 21's ``S_n q̇_p`` terms).
- Mass matrix by composite inertias (eq. 17): ``M[k, l] = F_kᵀ S_l`` for l on the
  path of k, ``F_k = Ic_k S_k (+ h_k)`` with ``Ic_k`` the inertia of everything moved
  by coordinate k and ``h_k`` the momentum of a beam's own elements per unit η̇_k
  (the ``M_re`` of eq. 7); the elastic block of one beam is
  ``S_eᵀ Ic S_e + M_ee`` (eq. 18, ``M*_ee = M_ee + S_sᵀ M*_rr S_s``).
- Bias forces by Newton–Euler over the rigid bodies and the beams' elements,
  stiffness ``K η`` and structural damping ``D η̇`` (eq. 8's ``K_ee q``) separately
  (:func:`elastic_forces`): ``M v̇ + C(q, v) v + K η + D η̇ = τ + Σ J_bᵀ F_b``.
- Forward dynamics by a dense Cholesky factorization of M (n ≲ 30: cheaper here than
  an articulated recursion with multi-coordinate bodies).

No I/O, clock or globals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
from numpy.typing import NDArray

from dynamics import beam as bm
from dynamics.spatial import cross3 as _c3
from dynamics.spatial import cross_batch as _cb
from dynamics.spatial import skew, skew_rows
from errors import ModelError, SingularityError

# dynamics.chain imports this module, so its model and data types are not imported here:
# the functions take a dynamics.chain.ChainModel / ChainData (checked by the caller).
ChainModel = Any
ChainData = Any

__all__ = [
    "FlexIndex",
    "FlexData",
    "derive",
    "elastic_forces",
    "potential_energy",
    "tip_deflection",
    "beam_points",
]

Array = NDArray[np.float64]


# --------------------------------------------------------------------------- model data


@dataclass(frozen=True, slots=True, eq=False)
class FlexIndex:
    """Constant index data of a chain with beam links (built once by :func:`derive`).

    Attributes
    ----------
    tables : tuple of BeamTables or None, (nb,)
    lengths : ndarray, shape (nb,)
        Beam lengths (0 for rigid bodies). [m]
    beam_bodies : tuple of int
        Bodies that are beams, ascending.
    e_slice : tuple of slice, (nb,)
        Each body's elastic coordinates in v (empty for rigid bodies).
    ne : int
        Number of elastic coordinates.
    n_rigid : int
        Number of base and joint coordinates (the first ``n_rigid`` of v).
    owner : ndarray of int, shape (nv,)
        Body each coordinate belongs to (the base's six: body 0).
    Dmat : ndarray, shape (nb, nv)
        1.0 where body c moves with coordinate l (joint l on the path to c, or an
        elastic coordinate of a beam c hangs on), else 0.0.
    A : ndarray of bool, shape (nv, nv)
        ``A[k, l]``: coordinate l is on the path of k, so ``M[k, l] = F_kᵀ S_l``.
    body_mass : ndarray, shape (nb,)
        Table mass plus beam mass of each body. [kg]
    K, D : ndarray, shape (ne, ne)
        Block-diagonal stiffness and structural damping.
    """

    tables: tuple[bm.BeamTables | None, ...]
    lengths: Array
    beam_bodies: tuple[int, ...]
    e_slice: tuple[slice, ...]
    ne: int
    n_rigid: int
    owner: NDArray[np.int64]
    Dmat: Array
    A: NDArray[np.bool_]
    body_mass: Array
    K: Array
    D: Array


def derive(names: tuple[str, ...], floating: bool, mass: Array,
           anc_b: NDArray[np.bool_], beams: tuple[bm.BeamLink | None, ...]) -> FlexIndex:
    """Index data for a chain with beam links (called by :class:`dynamics.chain.ChainModel`).

    Parameters
    ----------
    names : tuple of str, (nb,)
        Body names (for messages).
    floating : bool
    mass : ndarray, shape (nb,)
        Table masses (a beam body's may be 0: its beam carries the mass). [kg]
    anc_b : ndarray of bool, shape (nb, nb)
        ``anc_b[c, b]``: b is an ancestor of c or c itself.
    beams : tuple of BeamLink or None, (nb,)

    Returns
    -------
    FlexIndex

    Raises
    ------
    ModelError
        If the base is a beam or an entry is not a BeamLink (the body is named).
    """
    nb = len(names)
    if len(beams) != nb:
        raise ModelError(f"beams: {len(beams)} entries for {nb} bodies (one per body, None for rigid)")
    if beams[0] is not None:
        raise ModelError(f"body {names[0]!r}: the base cannot be a beam link")
    for b, bk in enumerate(beams):
        if bk is not None and not isinstance(bk, bm.BeamLink):
            raise ModelError(f"body {names[b]!r}: beams entry must be a BeamLink or None, got {type(bk).__name__}")
    n = nb - 1
    off = 6 if floating else 0
    n_rigid = off + n
    tables = tuple(None if bk is None else bm.beam_tables(bk) for bk in beams)
    e_slice = []
    start = n_rigid
    for t in tables:
        k = 0 if t is None else t.ne
        e_slice.append(slice(start, start + k))
        start += k
    nv = start
    ne = nv - n_rigid
    owner = np.zeros(nv, dtype=np.int64)
    level = np.zeros(nv, dtype=np.int64)
    owner[off:n_rigid] = np.arange(1, nb)
    for b, s in enumerate(e_slice):
        owner[s] = b
        level[s] = 1
    Dmat = np.zeros((nb, nv))
    for lcol in range(nv):
        o = owner[lcol]
        Dmat[:, lcol] = anc_b[:, o]
        if level[lcol] == 1:
            Dmat[o, lcol] = 0.0
    strict = anc_b & ~np.eye(nb, dtype=bool)  # strict[c, b]: b a strict ancestor of c
    same = owner[:, None] == owner[None, :]
    A = strict[owner[:, None], owner[None, :]] | (same & (level[None, :] <= level[:, None]))
    lengths = np.array([0.0 if bk is None else float(bk.length) for bk in beams])
    body_mass = np.asarray(mass, dtype=np.float64) + np.array([0.0 if bk is None else bk.mass for bk in beams])
    K = np.zeros((ne, ne))
    D = np.zeros((ne, ne))
    for t, s in zip(tables, e_slice, strict=True):
        if t is not None:
            es = slice(s.start - n_rigid, s.stop - n_rigid)
            K[es, es] = t.K
            D[es, es] = t.D
    for a in (owner, Dmat, A, lengths, body_mass, K, D):
        a.setflags(write=False)
    return FlexIndex(tables, lengths, tuple(b for b, t in enumerate(tables) if t is not None), tuple(e_slice),
                     ne, n_rigid, owner, Dmat, A, body_mass, K, D)


class _BeamState:
    """Per-beam kinematics at the current q (scratch); B-frame quantities about the body origin."""

    __slots__ = ("R", "d", "c_B", "Ip_B", "Hp_B", "Q2e", "T6", "h", "Sst", "u_W", "X_attach")

    def __init__(self, tables: bm.BeamTables) -> None:
        ne = tables.ne
        self.R = np.eye(3)                 # R_WB
        self.d = np.zeros(3)               # body origin from Bo, in W
        self.c_B = np.zeros(3)             # first moment Σ m_i ρ_i
        self.Ip_B = np.zeros((3, 3))       # point-mass rotational inertia about the body origin
        self.Hp_B = np.zeros((3, ne))      # Σ m_i ρ_i × Φ_i (angular momentum per unit η̇, point part)
        self.Q2e = np.zeros((3, ne, 3))    # Q2 contracted with η on its last index
        self.T6 = np.eye(6)                # body-origin, B-frame spatial force vectors → Bo, W
        self.h = np.zeros((6, ne))         # own momentum per unit η̇ at Bo, in W
        self.Sst = np.zeros((6, 3))        # unit columns of the tip rotations about z, y', x''
        self.u_W = np.zeros((3, ne))       # tip translation per unit η, in W
        self.X_attach = np.eye(4)          # X_W(tip) @ T0⁻¹: children's X_PJ applies to it


class FlexData:
    """Scratch for a chain with beam links (held by :class:`dynamics.chain.ChainData` as ``flex``).

    Attributes
    ----------
    beams : dict[int, _BeamState]
        Per beam body.
    I_tab : ndarray, shape (nb, 6, 6)
        Spatial inertias at Bo of the table (rigid) parts only; ``ChainData.I_ref`` holds
        the whole bodies (table parts plus deformed beams).
    chol : tuple or None
        Cholesky factor of M at the cached q.
    """

    __slots__ = ("beams", "I_tab", "chol")

    def __init__(self, model: ChainModel) -> None:
        fi = model.flex
        self.beams = {b: _BeamState(fi.tables[b]) for b in fi.beam_bodies}
        self.I_tab = np.zeros((model.nb, 6, 6))
        self.chol: tuple | None = None


# --------------------------------------------------------------------------- helpers


_I3 = np.eye(3)


def _crm(V: Array, S: Array) -> Array:
    """Spatial motion cross product ``V ×ₘ S`` = [ω × ω₂; ω × v₂ + v × ω₂] of two (6,) vectors (float arithmetic)."""
    w0, w1, w2, v0, v1, v2 = V.tolist()
    a0, a1, a2, b0, b1, b2 = S.tolist()
    return np.array([w1 * a2 - w2 * a1, w2 * a0 - w0 * a2, w0 * a1 - w1 * a0,
                     w1 * b2 - w2 * b1 + v1 * a2 - v2 * a1, w2 * b0 - w0 * b2 + v2 * a0 - v0 * a2,
                     w0 * b1 - w1 * b0 + v0 * a1 - v1 * a0])


# --------------------------------------------------------------------------- kinematics


def kinematics(model: ChainModel, data: ChainData, q: Array) -> None:
    """Fill ``data`` at q: poses, CoMs, columns S (joints and elastic), inertias, beam scratch (cached)."""
    key = q.tobytes()
    if data.q_key == key:
        return
    fi = model.flex
    fd = data.flex
    nb = model.nb
    X = data.X_WB
    off_q = 7 if model.floating else 0
    n = model.n
    if model.floating:
        from dynamics.spatial import quat_to_rotation

        X[0, :3, :3] = quat_to_rotation(q[3:7])
        X[0, :3, 3] = q[:3]
    else:
        X[0] = model.X_PJ[0]
    th = q[off_q:off_q + n]
    eta_all = q[off_q + n:]
    if nb > 1:
        coef = data.coef
        coef[:, 1] = np.sin(th) * model.rev_f
        coef[:, 2] = (1.0 - np.cos(th)) * model.rev_f
        coef[:, 3] = th * model.pri_f
        X_PB = np.einsum("nk,nkij->nij", coef, model.T_PB)
    tips: dict[int, tuple[Array, Array, Array, Array]] = {}
    for b in range(nb):
        if b > 0:
            p = model.parent[b]
            Xa = fd.beams[p].X_attach if p in fd.beams else X[p]
            np.matmul(Xa, X_PB[b - 1], out=X[b])
        tb = fi.tables[b]
        if tb is not None:
            eta = eta_all[fi.e_slice[b].start - fi.n_rigid:fi.e_slice[b].stop - fi.n_rigid]
            pT, R1, R2, R3 = bm.tip_transform(tb, float(fi.lengths[b]), eta)
            tips[b] = (pT, R1, R2, eta)
            X_BT = np.eye(4)
            X_BT[:3, :3] = R3
            X_BT[:3, 3] = pT
            Xa_b = X[b] @ X_BT  # the tip frame in W; children's X_PJ is given from the undeformed
            Xa_b[:3, 3] -= Xa_b[:3, 0] * fi.lengths[b]  # tip at x = L: X_attach = X_WT @ T0⁻¹
            fd.beams[b].X_attach = Xa_b
    R = data.R_WB
    pos = data.p_WoBo_W
    p_ref = pos[0].copy()
    data.p_ref[:] = p_ref
    com_tab = pos + (R @ model.p_BoBcm_B[:, :, None])[:, :, 0]
    # Joint columns at Bo, in W (as dynamics.chain).
    if nb > 1:
        a_W = np.einsum("bij,bj->bi", R[1:], model.axis_J[1:])
        r = pos[1:] - p_ref
        rev = model.revolute[1:, None]
        cols = slice(6 if model.floating else 0, fi.n_rigid)
        data.S[:3, cols] = np.where(rev, a_W, 0.0).T
        data.S[3:, cols] = np.where(rev.T, _cb(r, a_W).T, a_W.T)
    # Table parts' spatial inertias at Bo.
    m3 = model.mass[:, None, None]
    cx = skew_rows(com_tab - p_ref)
    mcx = m3 * cx
    I_tab = fd.I_tab
    I_tab[:, :3, :3] = R @ model.I_Bcm_B @ R.transpose(0, 2, 1) - mcx @ cx
    I_tab[:, :3, 3:] = mcx
    I_tab[:, 3:, :3] = -mcx
    I_tab[:, 3:, 3:] = m3 * np.eye(3)
    data.I_ref[:] = I_tab
    com = com_tab * model.mass[:, None]
    # Beams: inertia from the invariants, elastic columns, own momentum columns.
    for b in fi.beam_bodies:
        tb = fi.tables[b]
        st = fd.beams[b]
        Rb = R[b]
        d = pos[b] - p_ref
        pT, R1, R2, eta = tips[b]
        st.R = Rb
        st.d = d
        c_B = tb.C1 @ eta
        c_B[0] += tb.sx
        Q2e = tb.Q2 @ eta                                       # (3, ne, 3)
        Sxe = tb.Sx @ eta
        Pi = Q2e.transpose(0, 2, 1) @ eta                       # Σ m (Φη)(Φη)ᵀ
        Pi[0] += Sxe
        Pi[:, 0] += Sxe
        Pi[0, 0] += tb.sxx                                      # Π = Σ m_i ρ_i ρ_iᵀ
        Ip = np.trace(Pi) * _I3 - Pi
        # Hp_k = Σ m ρ_i × Φ_ik = e_x × Sx_k + Σ_l η_l G[l, k]
        Hp = (eta @ tb.G.reshape(tb.ne, -1)).reshape(tb.ne, 3).T if tb.ne else np.zeros((3, 0))
        Hp[1] -= tb.Sx[2]
        Hp[2] += tb.Sx[1]
        st.c_B, st.Ip_B, st.Hp_B, st.Q2e = c_B, Ip, Hp, Q2e
        I_B = np.zeros((6, 6))
        I_B[:3, :3] = Ip
        I_B[0, 0] += tb.J_tot
        cx = skew(c_B)
        I_B[:3, 3:] = cx
        I_B[3:, :3] = -cx
        I_B[3:, 3:] = tb.m_tot * _I3
        T6 = np.zeros((6, 6))                                   # [[R, d̃ R], [0, R]]
        T6[:3, :3] = Rb
        T6[3:, 3:] = Rb
        T6[:3, 3:] = skew(d) @ Rb
        st.T6 = T6
        data.I_ref[b] += T6 @ I_B @ T6.T
        com[b] += tb.m_tot * pos[b] + Rb @ c_B
        h_B = np.empty((6, tb.ne))
        h_B[:3] = Hp
        h_B[0] += tb.Jw
        h_B[3:] = tb.C1
        st.h = T6 @ h_B
        # Tip stages: translation (fixed in B), then rotations about z, y', x'' through the tip point.
        A = Rb @ np.array([[0.0, R1[0, 1], R2[0, 0]], [0.0, R1[1, 1], R2[1, 0]], [1.0, R1[2, 1], R2[2, 0]]])
        rT = d + Rb @ pT
        Sst = st.Sst
        Sst[:3] = A
        Sst[3:] = skew(rT) @ A
        st.u_W = Rb @ tb.tip_u
        Se = Sst @ tb.tip_psi[::-1]
        Se[3:] += st.u_W
        data.S[:, fi.e_slice[b]] = Se
    data.com_W[:] = com / np.maximum(fi.body_mass, 1e-300)[:, None]
    data.factor = None
    fd.chol = None
    data.q_key = key


# --------------------------------------------------------------------------- mass matrix


def _composite(model: ChainModel, data: ChainData) -> Array:
    """``Ic_l`` (nv, 6, 6): spatial inertia at Bo of everything coordinate l moves (Dmat-weighted sums)."""
    nb = model.nb
    return (model.flex.Dmat.T @ data.I_ref.reshape(nb, 36)).reshape(-1, 6, 6)


def mass_matrix(model: ChainModel, data: ChainData) -> Array:
    """Composite-inertia mass matrix with elastic coordinates (module docstring); fills ``data.M``."""
    fi = model.flex
    fd = data.flex
    S = data.S
    Ic = _composite(model, data)
    F = np.einsum("kij,jk->ik", Ic, S)
    for b in fi.beam_bodies:
        F[:, fi.e_slice[b]] += fd.beams[b].h
    FtS = F.T @ S
    A = fi.A
    M = np.where(A, FtS, np.where(A.T, FtS.T, 0.0))
    for b in fi.beam_bodies:
        e = fi.e_slice[b]
        Se = S[:, e]
        M[e, e] = Se.T @ Ic[e.start] @ Se + fi.tables[b].M_ee0
    data.M[:] = M
    return data.M


# --------------------------------------------------------------------------- velocities, forces


def _twists(model: ChainModel, data: ChainData, v: Array) -> tuple[Array, Array]:
    """Body-frame twists at Bo (6, nb) and the columns S·v (6, nv)."""
    Sv = data.S * v[None, :]
    return Sv @ model.flex.Dmat.T, Sv


def _project(model: ChainModel, data: ChainData, W: Array) -> Array:
    """``Q_l = S_lᵀ Σ_{c moved by l} W_c`` for body wrenches W (6, nb) at Bo."""
    Wd = W @ model.flex.Dmat
    return np.einsum("ik,ik->k", data.S, Wd)


def gen_forces(model: ChainModel, data: ChainData, F: Array) -> Array:
    """``Σ_b J_bᵀ F_b`` for wrenches ``F_Bo_W`` (nb, 6) at the body-frame origins."""
    r = data.p_WoBo_W - data.p_ref
    W = np.empty((6, model.nb))
    W[:3] = F[:, :3].T + _cb(r, F[:, 3:]).T
    W[3:] = F[:, 3:].T
    return _project(model, data, W)


def accelerations(model: ChainModel, data: ChainData, v: Array, vdot: Array | None = None) -> tuple[Array, Array]:
    """Body-frame twists V (6, nb) and spatial accelerations a (6, nb) at the fixed point coinciding with Bo, in W."""
    fi = model.flex
    fd = data.flex
    V, Sv = _twists(model, data, v)
    c = np.zeros((6, v.size))
    # Joint columns: V_owner ×ₘ S_l v_l (zero for the base columns).
    own = fi.owner[: fi.n_rigid]
    Vo = V[:, own]
    Sr = Sv[:, : fi.n_rigid]
    w, lin = Vo[:3], Vo[3:]
    c[:3, : fi.n_rigid] = _cb(w.T, Sr[:3].T).T
    c[3:, : fi.n_rigid] = (_cb(w.T, Sr[3:].T) + _cb(lin.T, Sr[:3].T)).T
    etad = v[fi.n_rigid:]
    for b in fi.beam_bodies:
        tb = fi.tables[b]
        st = fd.beams[b]
        e = fi.e_slice[b]
        ed = etad[e.start - fi.n_rigid:e.stop - fi.n_rigid]
        psid = tb.tip_psi @ ed
        # the tip stages: translation (column fixed in B), rotations about z, y', x'' (fixed in the
        # frame before each): c = Σ V_before ×ₘ (column · rate)
        s0 = np.zeros(6)
        s0[3:] = st.u_W @ ed
        Vt = V[:, b] + s0
        cb = _crm(V[:, b], s0)
        for j, rate in ((0, psid[2]), (1, psid[1]), (2, psid[0])):
            col = st.Sst[:, j] * rate
            cb += _crm(Vt, col)
            Vt += col
        if tb.ne:
            c[:, e.start] += cb  # one column suffices: all of a beam's elastic coordinates move the same bodies
    if vdot is not None:
        c += data.S * vdot[None, :]
    a = c @ fi.Dmat.T  # (6, nb)
    if model.floating:
        a[3:] -= _c3(v[:3], v[3:6])[:, None]  # spatial vs classical base acceleration
    return V, a


def rnea(model: ChainModel, data: ChainData, v: Array, vdot: Array | None = None) -> Array:
    """``C(q, v) v`` (+ ``M v̇`` if given) by Newton–Euler over bodies and beam elements (no stiffness)."""
    fi = model.flex
    fd = data.flex
    V, a = accelerations(model, data, v, vdot)
    etad = v[fi.n_rigid:]
    I = fd.I_tab
    hmom = np.einsum("bij,jb->ib", I, V)
    f = np.einsum("bij,jb->ib", I, a)
    f[:3] += (_cb(V[:3].T, hmom[:3].T) + _cb(V[3:].T, hmom[3:].T)).T
    f[3:] += _cb(V[:3].T, hmom[3:].T).T
    tau_own = np.zeros(v.size)
    eddot_all = None if vdot is None else vdot[fi.n_rigid:]
    for b in fi.beam_bodies:
        tb = fi.tables[b]
        st = fd.beams[b]
        e = fi.e_slice[b]
        es = slice(e.start - fi.n_rigid, e.stop - fi.n_rigid)
        ed = etad[es]
        Rb, d = st.R, st.d
        w, vO, Aw, Av = V[:3, b], V[3:, b], a[:3, b], a[3:, b]
        # In B, about the body origin: ω, α and the classical acceleration a0 of the origin.
        wB = w @ Rb
        aB = Aw @ Rb
        a0 = (Av + _c3(Aw, d) + _c3(w, vO + _c3(w, d))) @ Rb
        c_B, Ip, Hp, Q2e = st.c_B, st.Ip_B, st.Hp_B, st.Q2e
        # element accelerations a_i = a0 + α × ρ_i + ω × (ω × ρ_i) + 2 ω × Φ_i η̇ + Φ_i η̈, summed with the invariants
        C1ed = tb.C1 @ ed
        F = tb.m_tot * a0 + _c3(aB, c_B) + _c3(wB, _c3(wB, c_B) + 2.0 * C1ed)
        N = Q2e.transpose(0, 2, 1) @ ed                          # Σ m (Φη̇)(Φη)ᵀ ...
        N[:, 0] += tb.Sx @ ed                                    # ... + (Sx η̇) e_xᵀ = Σ m ρ̇_i ρ_iᵀ
        Mo = _c3(c_B, a0) + Ip @ aB + _c3(wB, Ip @ wB) + 2.0 * (np.trace(N) * wB - N @ wB)
        # own elastic forces Σ m Φ_ik·a_i: a0, α, centrifugal (T_k = Σ m Φ_ik ρ_iᵀ), Coriolis (G)
        Tw = np.einsum("akb,b->ak", Q2e, wB)                     # T_k ω without the Sx part
        Ged = (ed @ tb.G.reshape(tb.ne, -1)).reshape(tb.ne, 3)  # Σ_l η̇_l G[l, k]
        tau_e = (a0 @ tb.C1 + aB @ Hp + wB @ Tw + (tb.Sx.T @ wB) * wB[0]
                 - (wB @ wB) * (np.einsum("aka->k", Q2e) + tb.Sx[0]) + 2.0 * (Ged @ wB))
        if eddot_all is not None:
            edd = eddot_all[es]
            F += tb.C1 @ edd
            Mo += Hp @ edd
            tau_e += tb.M_pt @ edd
        if tb.J_tot:
            # torsion: J_i e_x e_xᵀ spinning at σ_i = ω_x + χ_i·η̇; n_i = J_i (σ̇_i e_x + σ_i ω × e_x)
            sig = tb.J_tot * wB[0] + tb.Jw @ ed
            sigd = tb.J_tot * aB[0]
            tau_e += tb.Jw * aB[0]
            if eddot_all is not None:
                sigd += tb.Jw @ edd
                tau_e += tb.M_w @ edd
            Mo += np.array([sigd, wB[2] * sig, -wB[1] * sig])
        f[:, b] += st.T6 @ np.concatenate([Mo, F])
        tau_own[e] = tau_e
    return _project(model, data, f) + tau_own


def momentum(model: ChainModel, data: ChainData, v: Array) -> tuple[Array, Array]:
    """Linear momentum (3,) and angular momentum about the W origin (3,), in W, with the beams' elastic parts."""
    fi = model.flex
    V, _ = _twists(model, data, v)
    h = np.einsum("bij,jb->i", data.I_ref, V)
    etad = v[fi.n_rigid:]
    for b in fi.beam_bodies:
        e = fi.e_slice[b]
        h += data.flex.beams[b].h @ etad[e.start - fi.n_rigid:e.stop - fi.n_rigid]
    P = h[3:].copy()
    return P, h[:3] + _c3(data.p_ref, P)


def kinetic_energy(model: ChainModel, data: ChainData, v: Array) -> float:
    """``½ Σ V_bᵀ I_b V_b + Σ η̇ᵀ h_bᵀ V_b + ½ η̇ᵀ M_ee η̇`` [J]."""
    fi = model.flex
    V, _ = _twists(model, data, v)
    T = 0.5 * float(np.einsum("ib,bij,jb->", V, data.I_ref, V))
    etad = v[fi.n_rigid:]
    for b in fi.beam_bodies:
        e = fi.e_slice[b]
        ed = etad[e.start - fi.n_rigid:e.stop - fi.n_rigid]
        T += float(ed @ (data.flex.beams[b].h.T @ V[:, b])) + 0.5 * float(ed @ fi.tables[b].M_ee0 @ ed)
    return T


def center_of_mass(model: ChainModel, data: ChainData) -> Array:
    """Total CoM (3,) in W of the moving bodies, beams deformed. [m]"""
    m = np.array(model.flex.body_mass)
    if not model.floating:
        m[0] = 0.0
    return (m @ data.com_W) / m.sum()


def _eta_of(model: ChainModel, q: Array, body: int) -> Array:
    """Elastic coordinates of one beam body from q."""
    e = model.flex.e_slice[body]
    d = 1 if model.floating else 0  # q has one more base entry (quaternion) than v
    return q[e.start + d:e.stop + d]


def frame_jacobian(model: ChainModel, data: ChainData, q: Array, body: int, pP: Array) -> Array:
    """Jacobian (6, nv) of ``[ω; v_P]`` in W of a point P of a body.

    On a rigid body P is fixed in it. On a beam body P is the point of the neutral axis
    at station ``x = P_x`` (clipped to [0, L]) carried by the deflection there, with the
    offset ``(P_y, P_z)`` fixed in the body frame; ω is the body frame's plus the
    torsion rate of the section at x.
    """
    fi = model.flex
    J = data.S * fi.Dmat[body][None, :]
    R = data.R_WB[body]
    r = data.p_WoBo_W[body] + R @ pP - data.p_ref
    tb = fi.tables[body]
    if tb is not None and tb.ne:
        Tt, Tw = _station_rows(model.beams[body], tb, float(np.clip(pP[0], 0.0, fi.lengths[body])))
        r = r + R @ (Tt @ _eta_of(model, q, body))
    J[3:] -= skew(r) @ J[:3]  # v_P = v + ω × r for the columns that move the body frame
    if tb is not None and tb.ne:
        e = fi.e_slice[body]
        J[3:, e] += R @ Tt
        J[:3, e] += np.outer(R[:, 0], Tw)
    return J


def _station_rows(beam: bm.BeamLink, tb: bm.BeamTables, x: float) -> tuple[Array, Array]:
    """Displacement (3, ne) in B and torsion angle (ne,) per unit η at station x of a beam."""
    ny, nz, nt = beam.modes_y, beam.modes_z, beam.modes_torsion
    L = float(beam.length)
    Tt = np.zeros((3, tb.ne))
    Tw = np.zeros(tb.ne)
    nbend = max(ny, nz)
    if nbend:
        phi, _, _ = bm.shape_functions(np.array([x]), L, nbend, beam.shape)
        Tt[1, :ny] = phi[:ny, 0]
        Tt[2, ny:ny + nz] = phi[:nz, 0]
    if nt:
        chi, _ = bm.torsion_functions(np.array([x]), L, nt)
        Tw[ny + nz:] = chi[:, 0]
    return Tt, Tw


# --------------------------------------------------------------------------- dynamics


def elastic_forces(model: ChainModel, q: Array, v: Array) -> Array:
    """Stiffness and structural damping forces ``[0; K η + D η̇]`` (nv,) of the beams.

    The generalized force the beams' strain exerts is its negative; it acts on the
    elastic coordinates only. [N, N·m per unit η]
    """
    fi = model.flex
    out = np.zeros(v.size)
    if fi is None or not fi.ne:
        return out
    eta = q[q.size - fi.ne:]
    out[fi.n_rigid:] = fi.K @ eta + fi.D @ v[fi.n_rigid:]
    return out


def potential_energy(model: ChainModel, q: Array) -> float:
    """Strain energy ``½ ηᵀ K η`` of the beams [J] (0 for a rigid chain)."""
    fi = model.flex
    if fi is None or not fi.ne:
        return 0.0
    eta = q[q.size - fi.ne:]
    return 0.5 * float(eta @ fi.K @ eta)


def forward_dynamics(model: ChainModel, data: ChainData, q: Array, v: Array, phi: Array) -> Array:
    """Solve ``M v̇ = φ − C v − K η − D η̇`` (φ: τ plus the bodies' generalized external forces) by Cholesky."""
    rhs = phi - rnea(model, data, v) - elastic_forces(model, q, v)
    fd = data.flex
    if fd.chol is None:
        M = mass_matrix(model, data)
        try:
            fd.chol = sla.cho_factor(M, lower=False, check_finite=False)
        except np.linalg.LinAlgError as err:
            raise SingularityError(f"mass matrix of the flexible chain not positive definite ({err})") from err
    data.vdot[:] = sla.cho_solve(fd.chol, rhs, check_finite=False)
    return data.vdot


def inverse_dynamics(model: ChainModel, data: ChainData, q: Array, v: Array, vdot: Array) -> Array:
    """``M v̇ + C v + K η + D η̇`` by Newton–Euler (external wrenches subtracted by the caller)."""
    return rnea(model, data, v, vdot) + elastic_forces(model, q, v)


# --------------------------------------------------------------------------- beam shape readouts


def tip_deflection(model: ChainModel, q: Array, body: int) -> tuple[Array, Array]:
    """Tip displacement and tip rotation angles of a beam body, in its body frame.

    Parameters
    ----------
    q : ndarray, shape (nq,)
    body : int
        A beam body.

    Returns
    -------
    u_B : ndarray, shape (3,)
        ``(0, u_y(L), u_z(L))``. [m]
    psi : ndarray, shape (3,)
        ``(ψ_x, ψ_y, ψ_z)`` = (torsion, −u_z'(L), u_y'(L)). [rad]

    Raises
    ------
    ModelError
        If the body is not a beam.
    """
    fi = model.flex
    if fi is None or fi.tables[body] is None:
        raise ModelError(f"body {model.names[body]!r} is not a beam link")
    tb = fi.tables[body]
    eta = _eta_of(model, q, body)
    return tb.tip_u @ eta, tb.tip_psi @ eta


def beam_points(model: ChainModel, data: ChainData, q: Array, body: int, x: Array) -> Array:
    """Points of a beam's deformed neutral axis at stations x, in W (for configuration plots).

    Parameters
    ----------
    q : ndarray, shape (nq,)
        ``data`` must hold its kinematics (any :mod:`dynamics.chain` call at q).
    body : int
    x : ndarray, shape (m,)
        Stations from the clamped end, in [0, L]. [m]

    Returns
    -------
    p_WoPo_W : ndarray, shape (m, 3)
        [m]

    Raises
    ------
    ModelError
        If the body is not a beam.
    """
    fi = model.flex
    if fi is None or fi.tables[body] is None:
        raise ModelError(f"body {model.names[body]!r} is not a beam link")
    beam = model.beams[body]
    xs = np.asarray(x, dtype=np.float64).reshape(-1)
    eta = _eta_of(model, q, body)
    ny, nz = beam.modes_y, beam.modes_z
    local = np.zeros((xs.size, 3))
    local[:, 0] = xs
    nbend = max(ny, nz)
    if nbend:
        phi, _, _ = bm.shape_functions(xs, float(beam.length), nbend, beam.shape)
        local[:, 1] = eta[:ny] @ phi[:ny]
        local[:, 2] = eta[ny:ny + nz] @ phi[:nz]
    return data.p_WoBo_W[body] + local @ data.R_WB[body].T
