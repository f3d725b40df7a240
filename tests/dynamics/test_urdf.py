"""dynamics.urdf against Pinocchio's own URDF reader, the reference tables, and bad files."""

import numpy as np
import pinocchio as pin
import pytest
from conftest import base_T, pin_from_urdf, pin_q, pin_vdot_to_ours, random_state, rel_err, sym_upper

from dynamics import cases
from dynamics import chain as ch
from dynamics.urdf import chain_from_urdf, chain_from_urdf_string
from errors import ConfigError, ModelError

SRMS = cases.reference_path("SRMS_Canadarm.urdf")
ETS = cases.reference_path("ETSVII.urdf")


def test_srms_table_values():
    """Masses, joints and limits of dynamics/data/README.md (SRMS table)."""
    m = chain_from_urdf(SRMS)
    assert m.names == ("Base_SRMS", "B2", "B3", "B4", "B5", "B6", "B7")
    assert m.joint_names == ("Shoulder_Yaw", "Shoulder_Pitch", "Elbow_Pitch", "Wrist_Pitch", "Wrist_Yaw", "Wrist_Roll")
    # B1 (63.24 kg) is welded to the 1 kg placeholder base; link_ee (0 kg) to B7
    np.testing.assert_allclose(m.mass, [64.24, 32.12, 139.35, 87.42, 8.48, 45.94, 45.21])
    np.testing.assert_allclose(m.q_lower, [-3.0962, 0.0, -2.75064, -2.0316, -2.0316, -7.714])
    np.testing.assert_allclose(m.q_upper, [3.0962, 2.485, 0.0, 2.0316, 2.0316, 7.714])
    np.testing.assert_allclose(m.qd_max, [0.03997, 0.03997, 0.0560, 0.0831, 0.0831, 0.0831])
    np.testing.assert_allclose(m.tau_max, [1570, 1570, 1074, 470, 470, 470])
    np.testing.assert_allclose(m.axis_J[1:], [[0, 0, 1], [0, 1, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]])


def test_etsvii_table_values():
    m = chain_from_urdf(ETS)
    np.testing.assert_allclose(m.mass, [2550, 35, 22.5, 21.9, 16.5, 26, 18.5])
    np.testing.assert_allclose(m.I_Bcm_B[0], [[6200, 48.2, 78.5], [48.2, 3540, -29.2], [78.5, -29.2, 7090]])
    assert np.all(np.isinf(m.q_lower)) and np.all(np.isinf(m.q_upper))  # continuous joints


@pytest.mark.parametrize("path", [SRMS, ETS])
@pytest.mark.parametrize("floating", [True, False])
def test_against_pinocchio_urdf_reader(rng, path, floating):
    """Same file, two readers: body poses, mass matrix and forward dynamics agree."""
    model = chain_from_urdf(path, floating_base=floating)
    if floating:
        pm = pin_from_urdf(path)
    else:
        pm = pin.buildModelFromUrdf(str(path))
        pm.gravity = pin.Motion.Zero()
    pd = pm.createData()
    data = ch.make_data(model)
    for _ in range(2):
        q, v = random_state(rng, model, scale=0.3)
        qp = pin_q(pm, model, q)
        T = base_T(model, q)
        Ti = np.linalg.inv(T)
        M = sym_upper(pin.crba(pm, pd, qp))
        assert rel_err(ch.mass_matrix(model, data, q), Ti.T @ M @ Ti) <= 1e-9
        pin.forwardKinematics(pm, pd, qp)
        X = ch.forward_kinematics(model, data, q)
        for b, jn in enumerate(model.joint_names, start=1):
            np.testing.assert_allclose(X[b], pd.oMi[pm.getJointId(jn)].homogeneous, atol=1e-12)
        tau = np.zeros(model.nv)
        tau[-model.n:] = rng.normal(size=model.n)
        a = ch.forward_dynamics(model, data, q, v, tau)
        a_pin = pin_vdot_to_ours(model, q, v, pin.aba(pm, pd, qp, Ti @ v, T.T @ tau))
        assert rel_err(a, a_pin) <= 1e-9


def test_base_replacement_is_applied():
    m = chain_from_urdf(SRMS, base_mass=1.0e5, base_inertia=np.diag([1.0, 2.0, 3.0]), base_com=[1.0, 2.0, 3.0])
    # base (1e5 kg) + welded B1 (63.24 kg at z = 0.5)
    assert m.mass[0] == pytest.approx(1.0e5 + 63.24)
    expected = (1.0e5 * np.array([1.0, 2.0, 3.0]) + 63.24 * np.array([0.0, 0.0, 0.5])) / (1.0e5 + 63.24)
    np.testing.assert_allclose(m.p_BoBcm_B[0], expected, rtol=1e-12)


URDF_BAD = """<robot name="r">
  <link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><mass value="{mass}"/>
    <inertia ixx="{ixx}" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="{jtype}"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint>
</robot>"""


def test_bad_urdf_refused():
    ok = dict(mass="2", ixx="1", jtype="revolute")
    assert chain_from_urdf_string(URDF_BAD.format(**ok)).n == 1
    with pytest.raises(ModelError, match=r"'b'.*mass.*-2"):
        chain_from_urdf_string(URDF_BAD.format(**{**ok, "mass": "-2"}))
    with pytest.raises(ModelError, match=r"'b'.*indefinite"):
        chain_from_urdf_string(URDF_BAD.format(**{**ok, "ixx": "-5"}))
    with pytest.raises(ModelError, match="unsupported type 'floating'"):
        chain_from_urdf_string(URDF_BAD.format(**{**ok, "jtype": "floating"}))
    with pytest.raises(ModelError, match="not well-formed"):
        chain_from_urdf_string("<robot><link name='a'>")
    with pytest.raises(ModelError, match="root"):
        chain_from_urdf_string("<robot><link name='a'/><link name='b'/></robot>")


def test_missing_reference_file_is_named():
    with pytest.raises(ConfigError, match="no_such.urdf"):
        cases.reference_path("no_such.urdf")
