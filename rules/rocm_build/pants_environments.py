"""Pants' environment types, imported in one place.

Pants 2.28 moved `pants.core.util_rules.environments` to `pants.core.environments.target_types`
(the target types and fields) and `pants.core.environments.rules` (the rules' request types),
without a shim (pantsbuild/pants#22438). The plugin imports them only from here, so that move
is a change of this file (docs/pants-versions.md).
"""

from pants.core.util_rules.environments import (  # noqa: F401 (re-exported)
    DockerEnvironmentTarget,
    DockerImageField,
    EnvironmentField,
    EnvironmentNameRequest,
    EnvironmentTarget,
    EnvironmentsSubsystem,
)
