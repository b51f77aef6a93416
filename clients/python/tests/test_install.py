"""pip installs clients/python (pyproject.toml, its standard-library build backend)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def has_pip() -> bool:
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


@unittest.skipUnless(has_pip(), "pip is not installed")
class InstallTest(unittest.TestCase):
    def test_pip_installs_the_package_with_no_build_isolation(self) -> None:
        with tempfile.TemporaryDirectory(prefix="flowd-install-") as target:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
                            "--no-cache-dir", "--target", target, ROOT], check=True, cwd=target)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env["PYTHONPATH"] = target
            out = subprocess.run(
                [sys.executable, "-c",
                 "import flowd, importlib.metadata as m; "
                 "print(flowd.__file__); print(m.version('flowd')); "
                 "print(flowd.Worker.workflow, flowd.StepFailed, flowd.Timeout, flowd.Cancelled, flowd.NonDeterminism)"],
                check=True, capture_output=True, text=True, cwd=target, env=env).stdout.splitlines()
            self.assertEqual(out[0], os.path.join(target, "flowd", "__init__.py"))
            with open(os.path.join(ROOT, "pyproject.toml")) as f:
                self.assertIn(f'version = "{out[1]}"', f.read())
            self.assertTrue(os.path.exists(os.path.join(target, "flowd", "py.typed")))
        self.assertFalse(os.path.exists(os.path.join(ROOT, "build")), "the build left files in the checkout")


if __name__ == "__main__":
    unittest.main()
