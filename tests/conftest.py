"""Settings shared by the whole suite.

Hypothesis runs under one profile everywhere: no deadline and no health checks that depend on how fast
this machine generates data (`too_slow`, `data_too_large`, `large_base_example`). CI runs on a busy
2-core machine, and a test that fails because the machine was slow is a defect, not a finding. The
number of examples stays what each test asks for. `UTVM_HYPOTHESIS_PROFILE=dev` keeps Hypothesis'
own defaults (deadlines and all health checks) for local runs that want them.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example),
    print_blob=True,
)
settings.register_profile("dev")
settings.load_profile(os.environ.get("UTVM_HYPOTHESIS_PROFILE", "ci"))
