"""Source distributions from PyPI, for the fixture scripts that build or run an original
tool from its source (make_ggml.py, make_ggml_gguf.py, make_gguf_split.py)."""

import io
import os
import re
import tarfile
import urllib.request


def sdist(package, version, into):
    """Unpacks the source distribution of `package` `version` from PyPI into `into` and
    returns its top folder."""
    name = package.replace("-", "_")
    with urllib.request.urlopen(f"https://pypi.org/simple/{package}/") as r:
        index = r.read().decode()
    found = re.search(rf'href="(https://[^"#]*/{name}-{re.escape(version)}\.tar\.gz)', index)
    if found is None:
        raise RuntimeError(f"PyPI has no source distribution of {package} {version}")
    with urllib.request.urlopen(found.group(1)) as r:
        data = r.read()
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        t.extractall(into, filter="data")
    return os.path.join(into, f"{name}-{version}")
