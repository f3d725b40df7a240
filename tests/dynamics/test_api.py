"""dynamics' public API: the listed names exist, and the names removed in 0.2.0 still work with a warning.

The deprecated aliases must warn (:class:`DeprecationWarning`) naming the new name, and must give
the same object or value as the new name.
"""

import importlib
import shutil

import numpy as np
import pytest

import dynamics
from dynamics import cases, impact, urdf
from dynamics import chain as ch
from errors import ModelError


def test_every_listed_module_and_name_exists():
    assert dynamics.__version__.count(".") == 2
    for mod in dynamics.__all__:
        if mod == "__version__":
            continue
        m = importlib.import_module(f"dynamics.{mod}")
        assert getattr(dynamics, mod) is m
        missing = [name for name in m.__all__ if not hasattr(m, name)]
        assert not missing, (mod, missing)
    with pytest.raises(AttributeError):
        dynamics.no_such_module  # noqa: B018  (the access is the test)


def test_chain_from_urdf_old_path_warns_and_is_the_urdf_reader():
    with pytest.warns(DeprecationWarning, match=r"dynamics\.urdf\.chain_from_urdf"):
        from dynamics.chain import chain_from_urdf
    assert chain_from_urdf is urdf.chain_from_urdf
    with pytest.warns(DeprecationWarning, match="chain_from_urdf"):
        assert ch.chain_from_urdf is urdf.chain_from_urdf
    with pytest.raises(AttributeError):
        ch.no_such_name  # noqa: B018


def test_reference_dir_old_name_warns_and_holds_the_models():
    with pytest.warns(DeprecationWarning, match=r"reference_path"):
        from dynamics.cases import REFERENCE_DIR
    assert (REFERENCE_DIR / "SRMS_Canadarm.urdf") == cases.reference_path("SRMS_Canadarm.urdf")
    assert (REFERENCE_DIR / "ETSVII.urdf").is_file()


def test_impulse_W_old_name_warns_and_is_lambda_rows():
    res = impact.plastic_impact_multibody(2.0 * np.eye(3), np.eye(3), [1.0, 0.0, 0.0], 3.0 * np.eye(3), np.eye(3),
                                          np.zeros(3))
    assert res.lambda_rows == pytest.approx([-1.2, 0.0, 0.0])     # f = -(1/2 + 1/3)^-1 * 1
    with pytest.warns(DeprecationWarning, match=r"lambda_rows"):
        old = res.impulse_W
    assert old is res.lambda_rows


def test_case_builders_take_a_model_path(tmp_path):
    """A copy of the packaged URDF gives the same model; a file of another robot is refused by name."""
    src = cases.reference_path("SRMS_Canadarm.urdf")
    copy = tmp_path / "my_srms.urdf"
    shutil.copy(src, copy)
    a, b = cases.srms_on_orbiter(), cases.srms_on_orbiter(model_path=copy)
    for name in ("X_PJ", "axis_J", "mass", "p_BoBcm_B", "I_Bcm_B"):
        assert np.array_equal(getattr(a.model, name), getattr(b.model, name)), name
    heavier = tmp_path / "heavy_etsvii.urdf"
    text = cases.reference_path("ETSVII.urdf").read_text()
    heavier.write_text(text)
    assert np.array_equal(cases.etsvii(model_path=heavier).model.mass, cases.etsvii().model.mass)
    with pytest.raises(ModelError, match="moving joints"):
        cases.etsvii(model_path=_two_link(tmp_path))
    with pytest.raises(OSError):
        cases.srms_on_orbiter(model_path=tmp_path / "absent.urdf")


def _two_link(tmp_path):
    p = tmp_path / "two.urdf"
    p.write_text("""<robot name="two">
  <link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint>
</robot>""")
    return p


def test_kernel_module_waits_for_a_module_another_thread_is_importing(tmp_path, monkeypatch):
    """A kernel module another thread is still importing (in ``sys.modules``, not yet whole) is waited for: a
    device's build in its thread and a model's build may load kernel modules that import one another
    (protocol.registry.build_members). The lookup's fast path alone hands out the half-made module."""
    import sys
    import threading
    import time

    (tmp_path / "probe_slow_kernels.py").write_text("import time\ntime.sleep(0.5)\nVALUE = 1\n")
    monkeypatch.setattr(dynamics, "__path__", [*dynamics.__path__, str(tmp_path)])
    name = "dynamics.probe_slow_kernels"
    monkeypatch.delitem(sys.modules, name, raising=False)
    t = threading.Thread(target=importlib.import_module, args=(name,))
    t.start()
    try:
        end = time.monotonic() + 5.0
        while name not in sys.modules and time.monotonic() < end:
            time.sleep(0.001)
        assert name in sys.modules, "the other thread's import never began"
        assert dynamics.kernel_module("probe_slow_kernels").VALUE == 1
    finally:
        t.join()
        sys.modules.pop(name, None)
