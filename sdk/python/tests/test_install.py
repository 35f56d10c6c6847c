"""pip installs the SDK from a checkout, offline (no build dependency)."""

import os
import subprocess
import sys
import tempfile
import unittest

from tests._serve import ROOT, require


class InstallTest(unittest.TestCase):
    def test_pip_install_from_checkout(self):
        has_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
        require(has_pip, "pip is not installed for " + sys.executable)
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--quiet", "--target", d,
                                os.path.join(ROOT, "sdk", "python")], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            p = subprocess.run([sys.executable, "-c", "import airlock, airlock.aio; print(airlock.__version__)"],
                               cwd=d, env=dict(os.environ, PYTHONPATH=d), capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.strip(), "0.1.0")
            self.assertTrue(os.path.exists(os.path.join(d, "airlock", "py.typed")))


if __name__ == "__main__":
    unittest.main()
