"""mypy --strict on the package and the code-workflow examples ([tool.mypy] of
pyproject.toml), when an interpreter here has mypy (Debian: python3-mypy)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def python_with_mypy() -> str | None:
    for python in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if python and os.path.exists(python) and subprocess.run(
                [python, "-m", "mypy", "--version"], capture_output=True).returncode == 0:
            return python
    return None


PYTHON = python_with_mypy()


@unittest.skipUnless(PYTHON or os.environ.get("CI") == "true", "mypy is not installed (apt-get install python3-mypy)")
class TypesTest(unittest.TestCase):
    def test_mypy_strict(self) -> None:
        # In CI (scripts/test installs it) a missing mypy is a failure.
        self.assertIsNotNone(PYTHON, "mypy is not installed (apt-get install python3-mypy)")
        assert PYTHON is not None
        res = subprocess.run([PYTHON, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull], cwd=ROOT,
                             capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)


if __name__ == "__main__":
    unittest.main()
