"""A PEP 517 build backend for the toolexec package, standard library only.

pip builds contrib/python with it (pyproject.toml), so installing the SDK
needs no network: no setuptools or other backend is fetched. It builds a
pure-Python wheel of the toolexec/ package and an sdist; metadata comes from
pyproject.toml's [project] table (name, version, description,
requires-python, license)."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11: the few keys we need, read by hand
    tomllib = None

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "toolexec"


def _project():
    path = os.path.join(HERE, "pyproject.toml")
    if tomllib:
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    project, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "project" and "=" in line:
                k, v = (s.strip() for s in line.split("=", 1))
                if v.startswith('"'):
                    project[k] = v.strip('"')
                elif k == "license":
                    project[k] = {"text": v.split('"')[1]}
    return project


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p.get("description", "")]
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    if "license" in p:
        lines.append("License: " + p["license"].get("text", ""))
    return p, "\n".join(lines) + "\n"


def _sources():
    root = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            yield os.path.join(root, name), PACKAGE + "/" + name


def _digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=" + h


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p, metadata = _metadata()
    dist_info = "%s-%s.dist-info" % (p["name"], p["version"])
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(metadata)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p, metadata = _metadata()
    name = "%s-%s-py3-none-any.whl" % (p["name"], p["version"])
    dist_info = "%s-%s.dist-info" % (p["name"], p["version"])
    record = []

    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data):
            whl.writestr(arcname, data)
            record.append("%s,%s,%d" % (arcname, _digest(data), len(data)))

        for path, arcname in _sources():
            with open(path, "rb") as f:
                add(arcname, f.read())
        add(dist_info + "/METADATA", metadata.encode())
        add(dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: _toolexec_build\n"
                                  b"Root-Is-Purelib: true\nTag: py3-none-any\n")
        record.append(dist_info + "/RECORD,,")
        whl.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    p, metadata = _metadata()
    base = "%s-%s" % (p["name"], p["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ("pyproject.toml", "_toolexec_build.py", "README.md"):
            tar.add(os.path.join(HERE, rel), base + "/" + rel)
        for path, arcname in _sources():
            tar.add(path, base + "/" + arcname)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = metadata.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name
