"""One actuator leg of the berthing rig as an FMI 2.0 co-simulation FMU (pythonfmu source).

A position servo driving a mass along the leg's axis: a spring-damper pulls the leg's moving
end (mass ``m``) towards the commanded position,

    m x'' = k (x_cmd - x) - c x',        F = k (x_cmd - x) - c x'

with ``x_cmd`` held over each communication step (zero-order hold) and integrated by one
classical Runge-Kutta step of ``h`` per ``doStep`` (exact to O(h^5) per step for this linear
law). Defaults: m = 5 kg, k = 2e4 N/m, c = 440 N s/m (natural frequency 10.1 Hz, damping
ratio 0.70). ASSUMED figures for a rig leg; the model is an example of a supplier's actuator
FMU, not a model of a particular rig.

Variables: input ``x_cmd`` [m]; outputs ``x`` [m], ``v`` [m/s], ``F`` [N] (the force the
servo applies to the leg's moving end); parameters ``m`` [kg], ``k`` [N/m], ``c`` [N s/m],
``x0`` [m] (the leg's position at the start).

Build it (no C compiler needed; pythonfmu ships the FMI wrapper)::

    pythonfmu build -f configs/examples/fmu/actuator_leg.py -d configs/examples/fmu

(``--handle-state --serialize-state`` gives an FMU that can save its state, for snapshots.)
"""

from pythonfmu import DefaultExperiment, Fmi2Causality, Fmi2Slave, Fmi2Variability, Real


class ActuatorLeg(Fmi2Slave):
    """The leg's servo (see the module docstring)."""

    author = "berthsim"
    description = "1-DOF rig actuator leg: a spring-damper position servo (example FMU)"
    default_experiment = DefaultExperiment(start_time=0.0, stop_time=1.0, step_size=0.001)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.m = 5.0
        self.k = 2.0e4
        self.c = 440.0
        self.x0 = 0.0
        self.x_cmd = 0.0
        self.x = 0.0
        self.v = 0.0
        self.F = 0.0
        for name in ("m", "k", "c", "x0"):
            self.register_variable(Real(name, causality=Fmi2Causality.parameter,
                                        variability=Fmi2Variability.tunable))
        self.register_variable(Real("x_cmd", causality=Fmi2Causality.input))
        for name in ("x", "v", "F"):
            self.register_variable(Real(name, causality=Fmi2Causality.output))

    def exit_initialization_mode(self):
        """Start at ``x0``, at rest, with the force the command asks for there."""
        self.x = self.x0
        self.v = 0.0
        self.F = self.k * (self.x_cmd - self.x)

    def _accel(self, x, v):
        return (self.k * (self.x_cmd - x) - self.c * v) / self.m

    def do_step(self, current_time, step_size):
        """One RK4 step of ``step_size`` with ``x_cmd`` held."""
        h = step_size
        x, v = self.x, self.v
        a1 = self._accel(x, v)
        x2, v2 = x + 0.5 * h * v, v + 0.5 * h * a1
        a2 = self._accel(x2, v2)
        x3, v3 = x + 0.5 * h * v2, v + 0.5 * h * a2
        a3 = self._accel(x3, v3)
        x4, v4 = x + h * v3, v + h * a3
        a4 = self._accel(x4, v4)
        self.x = x + h / 6.0 * (v + 2.0 * v2 + 2.0 * v3 + v4)
        self.v = v + h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
        self.F = self.k * (self.x_cmd - self.x) - self.c * self.v
        return True
