"""A PEP 517 build backend for the flowd package, standard library only.

`pip install ./clients/python` builds the wheel with it (no setuptools or wheel
package needed, so `pip install --no-build-isolation` works on a machine
without a package index). It packs flowd/ (the .py files and py.typed) into
flowd-VERSION-py3-none-any.whl; name, version, summary and requires-python come
from pyproject.toml's [project] table, the long description from README.md.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SDIST_FILES = ["pyproject.toml", "README.md", "build_backend/flowd_build.py"]


def _project() -> dict[str, str]:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("[project]", 1)[1].split("\n[", 1)[0]
    out = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(rf'^{re.escape(key)}\s*=\s*"([^"]*)"', table, re.M)
        if not m:
            raise RuntimeError(f"pyproject.toml: [project] has no {key}")
        out[key] = m.group(1)
    return out


def _metadata() -> str:
    p = _project()
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\nSummary: {p['description']}\n"
            f"Requires-Python: {p['requires-python']}\nLicense: Apache-2.0\n"
            f"Classifier: Programming Language :: Python :: 3\nClassifier: Typing :: Typed\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _package_files() -> list[str]:
    pkg = os.path.join(ROOT, "flowd")
    return sorted(f"flowd/{n}" for n in os.listdir(pkg) if n.endswith(".py") or n == "py.typed")


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _wheel_name() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}-py3-none-any.whl"


def _write_wheel(directory: str, files: dict[str, bytes]) -> str:
    info = _dist_info()
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: flowd_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = io.StringIO()
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files[f"{info}/RECORD"] = record.getvalue().encode()
    name = _wheel_name()
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            zi = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _read(rel: str) -> bytes:
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


# The PEP 517 / PEP 660 hooks.

def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Any = None) -> str:
    info = _dist_info()
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    return _write_wheel(wheel_directory, {rel: _read(rel) for rel in _package_files()})


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None) -> str:
    # A .pth file puts this directory on sys.path: edits take effect at once.
    return _write_wheel(wheel_directory, {"flowd_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        members = {rel: _read(rel) for rel in _SDIST_FILES + _package_files()}
        members["PKG-INFO"] = _metadata().encode()
        for rel, data in members.items():
            ti = tarfile.TarInfo(f"{base}/{rel}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1577836800
            tar.addfile(ti, io.BytesIO(data))
    return name
