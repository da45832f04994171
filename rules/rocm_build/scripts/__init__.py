"""The code that runs inside process sandboxes, as the package `rocm_build.scripts`.

The plugin imports these modules (`from rocm_build.scripts import sbom`) from the same files it
ships into sandboxes as resources (script_modules.py reads their bytes), so both sides decide
alike. In a sandbox a script runs by path with its siblings beside it, where it imports them by
their bare names; a module the plugin imports imports a sibling the same way only inside a
function the plugin does not call, or with `from . import` when it is imported as this package
(`__package__` set).
"""
