"""The SDK installs from a checkout offline: pip (when this Python has it)
or the standard-library build backend directly (the wheel pip would build)."""

import importlib
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

from tests._serve import ROOT, require

SDK = os.path.join(ROOT, "sdk", "python")


class InstallTest(unittest.TestCase):
    def check_installed(self, d: str) -> None:
        p = subprocess.run([sys.executable, "-c", "import airlock, airlock.aio; print(airlock.__version__, airlock.__file__)"],
                           cwd=d, env=dict(os.environ, PYTHONPATH=d), capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        version, path = p.stdout.split()
        self.assertEqual(version, "0.1.0")
        self.assertTrue(path.startswith(d), path)
        self.assertTrue(os.path.exists(os.path.join(d, "airlock", "py.typed")))

    def test_wheel_from_backend(self):
        sys.path.insert(0, os.path.join(SDK, "_build"))
        try:
            backend = importlib.import_module("airlock_build")
        finally:
            sys.path.pop(0)
        self.assertEqual(backend.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            wheel = backend.build_wheel(d)
            self.assertEqual(wheel, "airlock_sdk-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, wheel)) as zf:
                names = zf.namelist()
                self.assertIn("airlock_sdk-0.1.0.dist-info/RECORD", names)
                zf.extractall(os.path.join(d, "site"))
            self.check_installed(os.path.join(d, "site"))

    def test_pip_install_from_checkout(self):
        has_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
        require(has_pip, "pip is not installed for " + sys.executable + " (apt-get install python3-pip)")
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--quiet", "--target", d, SDK],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.check_installed(d)


if __name__ == "__main__":
    unittest.main()
