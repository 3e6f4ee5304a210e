"""Print the settings reference (docs/settings.md) from the declarations in settings.py:
``python -m hiveproject.settings_reference`` (bin/settings-reference runs it)."""

import sys

from hiveproject import settings

if __name__ == "__main__":
    sys.stdout.write(settings.env.markdown())
