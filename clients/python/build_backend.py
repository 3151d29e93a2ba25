"""The build backend of this package (PEP 517, PEP 660), on the standard
library alone, so that `pip install ./clients/python` needs nothing from
a package index, not even setuptools or wheel.

It builds a pure-Python wheel of the interlock folder, an editable wheel
that points at it, and an sdist of this folder's tracked files, with the
name, version, summary and requires-python of pyproject.toml.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
PACKAGE = "interlock"


def _project() -> Dict[str, str]:
    """The [project] fields this backend needs, read from pyproject.toml."""
    text = (HERE / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    out: Dict[str, str] = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(rf'^{re.escape(key)}\s*=\s*"([^"]*)"', section, re.M)
        if not m:
            raise ValueError(f"pyproject.toml: [project] has no {key} = \"...\"")
        out[key] = m.group(1)
    return out


def _dist_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata(p: Dict[str, str]) -> str:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {p['name']}\n"
        f"Version: {p['version']}\n"
        f"Summary: {p['description']}\n"
        f"Requires-Python: {p['requires-python']}\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    p = _project()
    dist = _dist_name(p["name"])
    info = f"{dist}-{p['version']}.dist-info"
    name = f"{dist}-{p['version']}-py3-none-any.whl"
    files = files + [
        (f"{info}/METADATA", _metadata(p).encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: interlock build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files + [(f"{info}/RECORD", record.encode())]:
            z.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return name


def _package_files() -> List[Tuple[str, bytes]]:
    root = HERE / PACKAGE
    return [
        (f"{PACKAGE}/{f.name}", f.read_bytes())
        for f in sorted(root.iterdir())
        if f.is_file() and (f.suffix == ".py" or f.name == "py.typed")
    ]


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    return _wheel(wheel_directory, _package_files())


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    """A wheel whose .pth file puts this folder on sys.path."""
    pth = f"{_dist_name(_project()['name'])}.pth"
    return _wheel(wheel_directory, [(pth, (str(HERE) + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _project()
    base = f"{_dist_name(p['name'])}-{p['version']}"
    name = f"{base}.tar.gz"
    paths = ["pyproject.toml", "README.md", "build_backend.py"] + [path for path, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for path in paths:
            data = (HERE / path).read_bytes()
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
        pkg_info = _metadata(p).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        info.mode = 0o644
        t.addfile(info, io.BytesIO(pkg_info))
    return name
