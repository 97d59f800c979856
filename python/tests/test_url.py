"""Files opened by URL: a small HTTP server with Range support, started here on loopback,
serves files that ztio wrote; ztio reads them back through ranged requests."""

import http.server
import re
import threading

import numpy as np
import pytest

import ztio
import ztio.numpy


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """GET and HEAD of files in `root`, honouring `Range: bytes=a-b` (one range)."""

    root = None
    ranges = []
    authorizations = []

    def log_message(self, *args):  # quiet
        pass

    def _body(self):
        type(self).authorizations.append(self.headers.get("Authorization"))
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return None
        return path.read_bytes()

    def do_HEAD(self):
        data = self._body()
        if data is None:
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_GET(self):
        data = self._body()
        if data is None:
            return
        size = len(data)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not m:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.write(data)
            return
        start = int(m.group(1))
        end = min(int(m.group(2)) + 1 if m.group(2) else size, size)
        type(self).ranges.append((self.path, start, end))
        self.send_response(206)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        self.wfile.write(data[start:end])


@pytest.fixture
def served(tmp_path):
    RangeHandler.root = tmp_path
    RangeHandler.ranges = []
    RangeHandler.authorizations = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tmp_path, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_file_opens_by_url_and_reads_the_same_values(served):
    root, base = served
    # Over 64 KiB + 1 MiB, so tensors lie outside the cached head and tail.
    tensors = {f"t{i}": np.arange(65536, dtype=np.float32) + i for i in range(8)}
    ztio.save_file(tensors, root / "m.zt")
    with ztio.open(f"{base}/m.zt") as f:
        assert sorted(f.keys()) == sorted(tensors)
        for name, want in tensors.items():
            np.testing.assert_array_equal(f.get_tensor(name), want)
        rows = f.get_slice("t3")[100:200]
        np.testing.assert_array_equal(rows, tensors["t3"][100:200])
        report = f.verify()
        assert report and report.checked == 8
    # Every request was a range of the file, none of the whole of it.
    assert RangeHandler.ranges and all(p == "/m.zt" for p, _, _ in RangeHandler.ranges)
    size = (root / "m.zt").stat().st_size
    assert all(e - s < size for _, s, e in RangeHandler.ranges)


def test_a_missing_url_is_not_found_and_a_safetensors_file_opens_too(served):
    root, base = served
    with pytest.raises(ztio.NotFoundError):
        ztio.open(f"{base}/nope.zt")
    ztio.numpy.save_file({"x": np.ones((4, 2), np.float32)}, str(root / "m.safetensors"))
    with ztio.safe_open(f"{base}/m.safetensors", framework="np") as f:
        assert f.keys() == ["x"]
        np.testing.assert_array_equal(f.get_tensor("x"), np.ones((4, 2), np.float32))


def test_a_server_without_ranges_is_read_whole_once(tmp_path):
    """The standard library's own file server (`python -m http.server`) ignores Range and
    answers with the whole file: the file is read whole, once, and opens as any other."""
    import functools

    tensors = {f"t{i}": np.arange(1000, dtype=np.float32) * i for i in range(4)}
    ztio.numpy.save_file(tensors, str(tmp_path / "m.safetensors"))
    gets = []

    class Counted(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):
            gets.append(self.headers.get("Range"))
            super().do_GET()

    handler = functools.partial(Counted, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/m.safetensors"
        loaded = ztio.numpy.load_file(url)
        assert sorted(loaded) == sorted(tensors)
        for name, want in tensors.items():
            np.testing.assert_array_equal(loaded[name], want)
        # Writable, as the arrays of a local load_file are (the copy is mapped privately).
        loaded["t1"] *= 2
        np.testing.assert_array_equal(loaded["t1"], tensors["t1"] * 2)
    finally:
        server.shutdown()
    # The ranged request it refused, then the whole file; nothing more.
    assert len(gets) == 2 and gets[0] is not None and gets[1] is None, gets


def test_a_presigned_url_keeps_its_query_on_every_request(served):
    """A presigned URL (S3's, GCS's, an Azure SAS) carries its signature in its query: every
    request for the file must carry it, or the store refuses it (403)."""
    root, base = served
    tensors = {f"t{i}": np.arange(65536, dtype=np.float32) + i for i in range(8)}
    ztio.numpy.save_file(tensors, str(root / "m.safetensors"))
    query = "X-Amz-Signature=s%2Fig&X-Amz-Expires=60"
    seen = []

    class Signed(RangeHandler):
        def do_GET(self):
            seen.append(self.path)
            if not self.path.endswith("?" + query):
                self.send_error(403)
                return
            self.path = self.path.split("?", 1)[0]
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Signed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/m.safetensors?{query}"
        with ztio.safe_open(url, framework="np") as f:
            for name, want in tensors.items():
                np.testing.assert_array_equal(f.get_tensor(name), want)
    finally:
        server.shutdown()
    assert len(seen) > 2 and all(p == "/m.safetensors?" + query for p in seen), seen


def test_a_hub_url_reads_the_resolve_url_under_hf_endpoint_with_the_token(served, monkeypatch):
    root, base = served
    monkeypatch.setenv("HF_ENDPOINT", base)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    repo = root / "org" / "tiny" / "resolve" / "main"
    repo.mkdir(parents=True)
    tensors = {"w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    ztio.numpy.save_file(tensors, str(repo / "model.safetensors"))
    with ztio.safe_open("hf://org/tiny/model.safetensors", framework="np") as f:
        np.testing.assert_array_equal(f.get_tensor("w"), tensors["w"])
    loaded = ztio.numpy.load_file("hf://org/tiny/model.safetensors")
    np.testing.assert_array_equal(loaded["w"], tensors["w"])
    assert RangeHandler.authorizations
    assert set(RangeHandler.authorizations) == {"Bearer hf_secret"}
    assert {p for p, _, _ in RangeHandler.ranges} == {"/org/tiny/resolve/main/model.safetensors"}
    # The repository named without a file: its model file, as a model folder gives it.
    with ztio.open("hf://org/tiny") as f:
        np.testing.assert_array_equal(f.get_tensor("w"), tensors["w"])
    with pytest.raises(ztio.NotFoundError, match="hf://org/tiny@v2 holds none of"):
        ztio.open("hf://org/tiny@v2")
    with pytest.raises(ztio.ArgumentError, match="the repository is not owner/name"):
        ztio.open("hf://org")
    with pytest.raises(ztio.NotFoundError, match="a repository id is owner/name"):
        ztio.open("hf://tiny/model.safetensors")
