"""Robustness, bad input (docs/reliability.md, "Bad input"):
The bad-input matrix. Each test names one input and the exact
message or decision expected. One project holds every bad file; it is indexed
once per module (watch off: these probe the indexer and provider, not the daemon)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctindex.providers import okf_markdown as okf
from tests.conftest import cli_main, write_config

MAX = 4096  # max_file_bytes of the test project
B = "b"  # scope root (an explicit scope: its root can go missing)


def cli_json(root: Path, *args: str) -> Any:
    result = cli_main("-C", str(root), "--json", *args)
    assert result.code in (0, 1), result.err
    return json.loads(result.out)


def sized(n: int) -> bytes:
    head = b"# Sized\n\nsizedword "
    return head + b"x" * (n - len(head))


FILES: dict[bytes, bytes] = {
    b"invalid-utf8.md": b"# Bad\n\nvalid start \xff\xfe then junk",
    b"nul.md": b"# Nul\n\nbinary\x00inside",
    b"bom.md": b"\xef\xbb\xbf---\ntitle: Bommed Title\n---\nbomword body\n",
    b"crlf.md": b"---\r\ntitle: Crlf Title\r\ntags: [crlftag]\r\n---\r\ncrlfword body\r\n",
    b"empty.md": b"",
    b"frontmatter-only.md": b"---\ntitle: Only Front\ntype: Note\n---\n",
    b"unterminated.md": b"---\ntitle: Never Closed\nunterminatedword\n",
    b"alias-bomb.md": (
        b"---\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        b"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\ntags: *g\ntitle: Bomb\n---\n"
        b"bombword\n"
    ),
    b"exact-max.md": sized(MAX),
    b"one-over-max.md": sized(MAX + 1),
    b"new\nline.md": b"# Newline name\n\nnewlineword\n",
    b"with  spaces .md": b"# Spaces\n\nspaceword\n",
    b"latin1-\xe9t\xe9.md": b"# Latin\n\nlatinword\n",
    b"L" * 252 + b".md": b"# Long\n\nlongnameword\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("badinput")
    write_config(root, B, "gone", "linked", "afile", watch=False, max_file_bytes=MAX)
    b = root / B
    b.mkdir()
    (b / "index.md").write_text("# root\n")
    (b / "good.md").write_text("# Good\n\ngoodword\n")
    for name, data in FILES.items():
        with open(os.path.join(os.fsencode(b), name), "wb") as f:
            f.write(data)
    os.symlink("loop-b", b / "loop-a.md")
    os.symlink("loop-a.md", b / "loop-b")
    os.symlink(".", b / "self")  # a folder loop: never followed
    (root / "outside").mkdir()
    (root / "outside" / "o.md").write_text("# Outside\n\noutsideword\n")
    os.symlink(root / "outside", root / "linked")  # a scope root that is a symlink
    (root / "afile").write_text("not a folder")  # a scope root that is a file
    result = cli_main("-C", str(root), "--json", "update")
    assert result.code == 0, result.err
    root_report = json.loads(result.out)
    (root / "report.json").write_text(json.dumps(root_report))
    yield root


def report(project: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((project / "report.json").read_text())
    return doc


def diag(project: Path) -> dict[str, dict[str, str]]:
    st = cli_json(project, "status", "--verbose")
    return {
        "errors": {e["path"]: e["message"] for e in st.get("errors", [])},
        "warnings": {w["path"]: w["message"] for w in st.get("warnings", [])},
    }


def hits(project: Path, query: str) -> set[str]:
    doc = cli_json(project, "search", "--limit", "100", "--", query)
    return {r["path"] for r in doc["results"]}


def why(project: Path, key: str) -> dict[str, Any]:
    doc: dict[str, Any] = cli_json(project, "why", str(project / key))["decisions"][0]
    return doc


def test_robust_input_invalid_utf8(project: Path) -> None:
    # the path is the item's `path`; the message does not repeat it
    assert diag(project)["errors"]["b/invalid-utf8.md"] == "invalid UTF-8 at byte 19"


def test_robust_input_nul_byte(project: Path) -> None:
    assert diag(project)["errors"]["b/nul.md"] == "contains a NUL byte (not a text document)"


def test_robust_input_utf8_bom(project: Path) -> None:
    assert hits(project, "bomword") == {"b/bom.md"}
    assert hits(project, "title:bommed") == {"b/bom.md"} or hits(project, "Bommed") == {"b/bom.md"}
    assert "b/bom.md" not in diag(project)["warnings"]


def test_robust_input_crlf_frontmatter(project: Path) -> None:
    assert hits(project, "tag:crlftag") == {"b/crlf.md"}
    assert hits(project, "crlfword") == {"b/crlf.md"}


def test_robust_input_empty_file_is_a_document(project: Path) -> None:
    doc = okf.parse("b/empty.md", b"", B)
    assert isinstance(doc, okf.Document) and doc.title == "empty" and doc.body == ""
    assert hits(project, "empty") == {"b/empty.md"}


def test_robust_input_frontmatter_only(project: Path) -> None:
    assert hits(project, "type:note") == {"b/frontmatter-only.md"}


def test_robust_input_unterminated_frontmatter(project: Path) -> None:
    assert (
        diag(project)["warnings"]["b/unterminated.md"]
        == "frontmatter has no closing '---' line; indexed as plain text"
    )
    assert hits(project, "unterminatedword") == {"b/unterminated.md"}


def test_robust_input_yaml_alias_bomb_bounded_memory(project: Path) -> None:
    """9^7 list items if expanded; composed as a node graph it is a few KiB."""
    tracemalloc.start()
    got = okf.parse("b/alias-bomb.md", FILES[b"alias-bomb.md"], B)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert isinstance(got, okf.Document) and got.title == "Bomb"
    assert peak < 8 << 20, peak
    assert hits(project, "bombword") == {"b/alias-bomb.md"}


def test_robust_input_huge_frontmatter_bounded_memory() -> None:
    data = b"---\n" + b"k: " + b"v" * (4 << 20) + b"\n---\nhugeword\n"
    tracemalloc.start()
    got = okf.parse("b/huge.md", data, B)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert isinstance(got, okf.Document)
    assert got.warning == (
        "b/huge.md: frontmatter larger than 64 KiB not parsed; indexed as plain text"
    )
    assert peak < 12 * len(data), peak  # a few copies of the text, never a YAML tree of it


def test_robust_input_exactly_max_file_bytes_is_indexed(project: Path) -> None:
    assert why(project, "b/exact-max.md")["reason"] == "included"
    assert "b/exact-max.md" in hits(project, "sizedword")


def test_robust_input_one_byte_over_max_is_too_large(project: Path) -> None:
    assert why(project, "b/one-over-max.md")["reason"] == "too-large"
    assert "b/one-over-max.md" not in hits(project, "sizedword")


@pytest.mark.parametrize(
    ("name", "word"),
    [
        (b"new\nline.md", "newlineword"),
        (b"with  spaces .md", "spaceword"),
        (b"latin1-\xe9t\xe9.md", "latinword"),
        (b"L" * 252 + b".md", "longnameword"),
    ],
)
def test_robust_input_odd_file_names_round_trip(project: Path, name: bytes, word: str) -> None:
    key = "b/" + os.fsdecode(name)
    assert hits(project, word) == {key}
    assert os.path.exists(os.fsencode(project) + b"/b/" + name)  # the key gives the bytes back


def test_robust_input_symlink_loops_are_not_followed(project: Path) -> None:
    assert why(project, "b/loop-a.md")["reason"] == "not-regular"
    assert report(project)["errors"] == 2  # invalid-utf8 and nul; nothing from the loops


def test_robust_input_scope_root_missing_symlink_or_file_is_reported(project: Path) -> None:
    notes = "\n".join(report(project)["notes"])
    assert "scope root missing, a symlink or not a folder" in notes
    for root in ("gone", "linked", "afile"):
        assert json.dumps(root) in notes, notes
    assert hits(project, "outsideword") == set()  # the symlinked root is never followed
    direct = cli_json(project, "search", "--direct", "outsideword")
    assert direct["results"] == []  # nor by the --direct oracle (it used to follow it)
    text = cli_main("-C", str(project), "status").out
    assert "not seen  scope root missing" in text


def test_robust_input_scope_root_vanishing_is_not_a_silent_mass_drop(tmp_path: Path) -> None:
    write_config(tmp_path, "kb", watch=False)
    (tmp_path / "kb").mkdir()
    for i in range(5):
        (tmp_path / "kb" / f"d{i}.md").write_text(f"# D{i}\n\ndropword\n")
    assert cli_main("-C", str(tmp_path), "update").code == 0
    (tmp_path / "kb").rename(tmp_path / "kb-moved")
    result = cli_main("-C", str(tmp_path), "update")
    assert result.code == 0
    assert "-5 removed" in result.out
    assert (
        'scope root missing, a symlink or not a folder (its documents are removed): 1 ("kb")'
    ) in result.err


# Opening relative to folder descriptors is what reaches past PATH_MAX; the
# path walk cannot (nor can Windows without long-path support) and reports
# the folder as "too deep" instead (ctindex/reconciler/walk.py, too_deep).
@pytest.mark.needs("dir_fd")
def test_robust_input_path_deeper_than_path_max_is_indexed_and_agrees_with_direct(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, "kb", watch=False)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "top.md").write_text("# Top\n\ntopword\n")
    fd = os.open(tmp_path / "kb", os.O_RDONLY | os.O_DIRECTORY)
    try:  # 20 levels of 250-byte names: > 4096 bytes, built relative to folder fds
        for _ in range(20):
            os.mkdir("d" * 250, dir_fd=fd)
            nfd = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        w = os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(w, b"# Deep\n\ndeepword\n")
        os.close(w)
    finally:
        os.close(fd)
    # Both walk relative to folder descriptors, so a 5 KiB path is no obstacle;
    # --direct used to open absolute paths and silently missed it (a divergence).
    deep = "kb/" + "/".join(["d" * 250] * 20) + "/deep.md"
    assert hits(tmp_path, "deepword") == {deep}
    direct = cli_json(tmp_path, "search", "--direct", "deepword")
    assert {r["path"] for r in direct["results"]} == {deep}


NOBODY = 65534
# The interpreter, the venv and maybe the checkout are not readable by
# nobody (/root, a 0700 mktemp folder in CI). The child therefore runs the
# same commands once as root on a scratch project (every lazy import is then
# loaded), and only then drops to uid nobody for the real work.
AS_NOBODY = r"""
import io, json, os, shutil, sys, tempfile
import ctindex.cli
warm = tempfile.mkdtemp()
os.makedirs(os.path.join(warm, ".ct"))
os.makedirs(os.path.join(warm, "kb", "sub"))
with open(os.path.join(warm, ".ct", "index.jsonc"), "w") as f:
    json.dump({"version": 1, "watch": False,
               "scopes": [{"root": "kb", "provider": "okf-markdown"}]}, f)
with open(os.path.join(warm, "kb", "a.md"), "w") as f:
    f.write("---\ntitle: t\ntags: [x]\n---\nwarm up\n")
for args in (["update"], ["search", "warm OR x*"], ["status", "--verbose"]):
    ctindex.cli.main(["-C", warm, "--json", *args], stdout=io.StringIO(), stderr=io.StringIO())
with open(os.path.join(warm, "kb", "a.md"), "a") as f:
    f.write("more\n")
os.remove(os.path.join(warm, "kb", "a.md"))
ctindex.cli.main(["-C", warm, "--json", "update"], stdout=io.StringIO(), stderr=io.StringIO())
shutil.rmtree(warm)
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
sys.exit(ctindex.cli.main(sys.argv[1:]))
"""


def as_nobody(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(root)}
    return subprocess.run(
        [sys.executable, "-c", AS_NOBODY, "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another uid")
def test_robust_input_unreadable_file_and_folder_keep_last_version(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A real EACCES (a child that dropped to uid nobody): the unreadable file
    and folder keep their last indexed version and are reported."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ctindex-nobody-"))
    try:
        os.chmod(root, 0o755)
        write_config(root, "kb", watch=False)
        (root / "kb" / "sub").mkdir(parents=True)
        (root / "kb" / "a.md").write_text("# A\n\nlockedfileword\n")
        (root / "kb" / "sub" / "s.md").write_text("# S\n\nlockeddirword\n")
        for dirpath, dirs, files in os.walk(root):
            for n in [dirpath, *(os.path.join(dirpath, f) for f in files + dirs)]:
                os.chown(n, NOBODY, NOBODY)
        first = as_nobody(root, "update")
        assert first.returncode == 0, first.stderr
        os.chmod(root / "kb" / "a.md", 0)
        os.chmod(root / "kb" / "sub", 0)
        done = as_nobody(root, "--json", "update")
        assert done.returncode == 0, done.stderr
        notes = json.loads(done.stdout)["notes"]
        assert 'unreadable file (keeps its last indexed version): 1 ("kb/a.md")' in notes
        assert any(n.startswith("unreadable folder") and '"kb/sub"' in n for n in notes)
        found = as_nobody(root, "--json", "search", "lockedfileword OR lockeddirword")
        assert {r["path"] for r in json.loads(found.stdout)["results"]} == {
            "kb/a.md",
            "kb/sub/s.md",
        }
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(root)], check=False)
        subprocess.run(["rm", "-rf", str(root)], check=False)
