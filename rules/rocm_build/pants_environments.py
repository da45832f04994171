"""Pants' environment types, imported in one place.

Pants 2.28 moved `pants.core.util_rules.environments` to `pants.core.environments.target_types`
(the target types and fields) and `pants.core.environments.rules` (the rules' request types),
without a shim (pantsbuild/pants#22438). The plugin imports them only from here: from the new
modules where they exist, else from the old one (Pants 2.17 to 2.27); `environment_rules` is
the module whose `rules()` resolve an environment's name and target.
"""

__all__ = [
    "DockerEnvironmentTarget",
    "DockerImageField",
    "EnvironmentField",
    "EnvironmentNameRequest",
    "EnvironmentTarget",
    "EnvironmentsSubsystem",
    "environment_rules",
]

try:
    from pants.core.environments import rules as environment_rules
    from pants.core.environments.rules import EnvironmentNameRequest
    from pants.core.environments.subsystems import EnvironmentsSubsystem
    from pants.core.environments.target_types import (
        DockerEnvironmentTarget,
        DockerImageField,
        EnvironmentField,
        EnvironmentTarget,
    )
except ImportError:  # Pants before 2.28
    from pants.core.util_rules import environments as environment_rules
    from pants.core.util_rules.environments import (
        DockerEnvironmentTarget,
        DockerImageField,
        EnvironmentField,
        EnvironmentNameRequest,
        EnvironmentTarget,
        EnvironmentsSubsystem,
    )
