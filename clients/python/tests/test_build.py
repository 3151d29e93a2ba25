"""build_backend.py: pip install ./clients/python with nothing from an index."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
import build_backend  # noqa: E402

import interlock  # noqa: E402


class BuildTest(unittest.TestCase):
    def test_wheel_holds_the_package_with_a_true_record_and_imports(self) -> None:
        self.assertEqual(build_backend.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            name = build_backend.build_wheel(d)
            self.assertEqual(name, f"interlock_client-{interlock.__version__}-py3-none-any.whl")
            whl = Path(d) / name
            with zipfile.ZipFile(whl) as z:
                names = set(z.namelist())
                for module in ("__init__", "client", "errors", "payloads"):
                    self.assertIn(f"interlock/{module}.py", names)
                self.assertIn("interlock/py.typed", names)
                info = f"interlock_client-{interlock.__version__}.dist-info"
                metadata = z.read(f"{info}/METADATA").decode()
                self.assertIn("Requires-Python: >=3.9", metadata)
                self.assertNotIn("Requires-Dist", metadata)
                for line in z.read(f"{info}/RECORD").decode().splitlines():
                    path, digest, size = line.split(",")
                    if path.endswith("RECORD"):
                        continue
                    data = z.read(path)
                    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), (want, len(data)), path)
            # The wheel alone, on sys.path, is the package.
            out = subprocess.run(
                [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import interlock; print(interlock.__file__, interlock.__version__)", str(whl)],
                capture_output=True, text=True, check=True, cwd=d,
            ).stdout
            self.assertIn(name, out)
            self.assertIn(interlock.__version__, out)

    def test_sdist_holds_what_a_build_needs(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            name = build_backend.build_sdist(d)
            with tarfile.open(Path(d) / name) as t:
                names = {m.name.split("/", 1)[1] for m in t.getmembers()}
        self.assertTrue({"pyproject.toml", "README.md", "build_backend.py", "PKG-INFO", "interlock/client.py"} <= names, names)
