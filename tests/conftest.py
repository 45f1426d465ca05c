"""Settings shared by the whole suite.

Hypothesis runs under one profile everywhere: no deadline and no health checks that depend on how fast
this machine generates data (`too_slow`, `data_too_large`, `large_base_example`). CI runs on a busy
2-core machine, and a test that fails because the machine was slow is a defect, not a finding. The
number of examples stays what each test asks for. `UTVM_HYPOTHESIS_PROFILE=dev` keeps Hypothesis'
own defaults (deadlines and all health checks) for local runs that want them.

A suite started as a shell's background job (`make test &`, `nohup make test &`) inherits SIGINT ignored,
and every command a test starts would inherit it too: the Ctrl-C tests, which send SIGINT to `utvm` as a
terminal does, would then see it ignored, as `utvm` rightly leaves it. The suite restores SIGINT's default
first; the test of a command started with SIGINT ignored ignores it itself.
"""

from __future__ import annotations

import os
import signal

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example),
    print_blob=True,
)
settings.register_profile("dev")
settings.load_profile(os.environ.get("UTVM_HYPOTHESIS_PROFILE", "ci"))

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # (module docstring)
    signal.signal(signal.SIGINT, signal.default_int_handler)
