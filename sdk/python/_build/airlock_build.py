"""A PEP 517 build backend for airlock-sdk with the standard library only.

pip builds from a checkout without fetching setuptools or wheel (PyPI may be
unreachable where Airlock runs): a wheel is a zip of the package plus
METADATA, WHEEL and RECORD, which is all this writes.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME, DIST = "airlock-sdk", "airlock_sdk"


def _version():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        return re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: Python SDK of Airlock: sandboxes for AI agents\n"
            "Requires-Python: >=3.9\nLicense: Apache-2.0\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _package_files():
    base = os.path.join(ROOT, "airlock")
    for name in sorted(os.listdir(base)):
        if name.endswith(".py") or name == "py.typed":
            yield os.path.join(base, name), "airlock/" + name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = f"{DIST}-{_version()}.dist-info"
    wheel = f"{DIST}-{_version()}-py3-none-any.whl"
    records = []

    def add(zf, arcname, data):
        zf.writestr(arcname, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append(f"{arcname},sha256={digest},{len(data)}")

    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as zf:
        for path, arcname in _package_files():
            with open(path, "rb") as f:
                add(zf, arcname, f.read())
        add(zf, f"{info}/METADATA", _metadata().encode())
        add(zf, f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: airlock_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        records.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{_version()}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "README.md", "_build/airlock_build.py"]:
            tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        for path, arcname in _package_files():
            tar.add(path, arcname=f"{base}/{arcname}")
        pkg = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg)
        tar.addfile(ti, io.BytesIO(pkg))
    return name
