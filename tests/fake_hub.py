"""A minimal Hugging Face Hub on localhost, serving kernel repositories from a folder (stdlib http.server).

Only what kernels and huggingface_hub ask for when resolving and downloading a kernel:
  GET  /api/kernels/ORG/NAME/refs                         branches vN -> commit
  GET  /api/kernels/ORG/NAME/tree/REV/build               the build variant folders
  GET  /api/kernels/ORG/NAME/revision/REV                 repo info with the file list (siblings)
  HEAD/GET /kernels/ORG/NAME/resolve/REV/PATH             file metadata (X-Repo-Commit, ETag) and content
  GET  /api/organizations/ORG/overview                    ROOT/ORG/org.json (kernels' publisher trust check)
Repositories live in ROOT/ORG/NAME/COMMIT/... with ROOT/ORG/NAME/refs.json = {"v1": COMMIT, ...}.
The test points HF_ENDPOINT at it; huggingface_hub and kernels run unchanged. This stands in for the real
Hub only because this machine cannot reach it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse


class _Handler(BaseHTTPRequestHandler):
    root: Path
    log: list[str]

    def log_message(self, fmt: str, *args: object) -> None:  # keep pytest output clean
        pass

    def _json(self, obj: object, code: int = 200) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _missing(self) -> None:
        self.send_response(404)
        self.send_header("X-Error-Code", "EntryNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _repo(self, org: str, name: str) -> tuple[Path, dict[str, str]] | None:
        base = self.root / org / name
        if not (base / "refs.json").is_file():
            return None
        return base, json.loads((base / "refs.json").read_text())

    def _commit(self, refs: dict[str, str], rev: str) -> str | None:
        rev = unquote(rev)
        if rev in refs:
            return refs[rev]
        return rev if rev in refs.values() else None

    def _serve_file(self, parts: list[str]) -> None:
        """Answer /kernels/<org>/<name>/resolve/<rev>/<file> with the file's bytes (headers only for HEAD)."""
        got = self._repo(parts[1], parts[2])
        commit = self._commit(got[1], parts[4]) if got else None
        f = (got[0] / commit / "/".join(parts[5:])) if commit else None
        if f is None or not f.is_file():
            return self._missing()
        data = f.read_bytes()
        self.send_response(200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        return None

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        self.log.append(f"{self.command} {path}")
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "kernels"] and len(parts) >= 5:
            got = self._repo(parts[2], parts[3])
            if got is None:
                return self._json({"error": "Repository not found"}, 404)
            base, refs = got
            if parts[4] == "refs":
                return self._json({"branches": [{"name": k, "ref": f"refs/heads/{k}", "targetCommit": v}
                                                for k, v in refs.items()], "converts": [], "tags": []})
            commit = self._commit(refs, parts[5]) if len(parts) > 5 else None
            if commit is None:
                return self._json({"error": "Revision not found"}, 404)
            snap = base / commit
            if parts[4] == "tree":
                recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                return self._json(_tree(snap, snap / "/".join(parts[6:]), recursive))
            if parts[4] == "revision":
                files = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file())
                return self._json({"id": f"{parts[2]}/{parts[3]}", "sha": commit, "private": False,
                                   "siblings": [{"rfilename": f} for f in files]})
            return self._json({"error": "unknown"}, 404)
        if parts[:2] == ["api", "organizations"] and len(parts) == 4 and parts[3] == "overview":
            org = self.root / parts[2] / "org.json"
            return self._json(json.loads(org.read_text())) if org.is_file() else self._json({"error": "no org"}, 404)
        if parts[:1] == ["kernels"] and len(parts) >= 6 and parts[3] == "resolve":
            return self._serve_file(parts)
        return self._json({"error": "unknown route"}, 404)


def _tree(snap: Path, folder: Path, recursive: bool) -> list[dict[str, Any]]:
    """The Hub's tree listing of `folder` inside the snapshot (all levels when recursive)."""
    items = []
    listing = (folder.rglob("*") if recursive else folder.iterdir()) if folder.is_dir() else []
    for p in sorted(listing):
        rel = str(p.relative_to(snap))
        if p.is_dir():
            items.append({"type": "directory", "oid": hashlib.sha1(rel.encode()).hexdigest(), "path": rel})
        else:
            items.append({"type": "file", "oid": hashlib.sha1(p.read_bytes()).hexdigest(),
                          "size": p.stat().st_size, "path": rel})
    return items


class FakeHub:
    """`with FakeHub(root) as hub: env["HF_ENDPOINT"] = hub.url`."""

    def __init__(self, root: Path):
        handler = type("Handler", (_Handler,), {"root": root, "log": []})
        self.log = handler.log
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def publish(root: Path, repo_id: str, variants: list[str], versions: tuple[int, ...] = (1, 2),
            name: str | None = None) -> str:
    """Put `repo_id` with `variants` (one commit) on the fake Hub; branches vN for `versions`."""
    from tests.kernel_repos import write_variant

    org, repo = repo_id.split("/")
    commit = hashlib.sha1(f"hub:{repo_id}:{','.join(sorted(variants))}".encode()).hexdigest()
    base = root / org / repo
    for v in variants:
        write_variant(base / commit / "build", name or repo, v)
    (base / "refs.json").write_text(json.dumps({f"v{v}": commit for v in versions}))
    return commit


def organization(root: Path, org: str, *, trusted: bool) -> None:
    """The organisation page kernels' publisher trust check reads (`trustedKernelPublisher`)."""
    (root / org).mkdir(parents=True, exist_ok=True)
    (root / org / "org.json").write_text(json.dumps({"name": org, "fullname": org, "avatarUrl": "",
                                                     "trustedKernelPublisher": trusted}))
