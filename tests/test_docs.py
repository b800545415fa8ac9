"""README.md against the tree it describes.

The architecture tree (the first code block under README's "## Architecture")
names one path a line, at the line's start; lines that begin with a space
continue the description above them. A path ending in "/" names a folder.
The tests hold the tree to the checkout: every file under engine/,
tokenizer/, server/ and exporter/ (those folders that exist) and every
top-level .c, .h and .py file is named, and every path named exists. They
also check README's links to files and sections, and that README's set-up
commands are the ones .ci/run runs.
"""
import os
import re

import common

BUILD_INDEPENDENT = True

ROOT = common.ROOT
README = os.path.join(ROOT, "README.md")
FOLDERS = ("engine", "tokenizer", "server", "exporter")   # every file under these is named
SKIP_DIRS = {"__pycache__"}
SKIP_EXT = (".pyc", ".pyo")


def readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def tree_entries(text):
    """The paths the architecture tree names, in order."""
    m = re.search(r"^## Architecture\n", text, re.M)
    assert m, "README has no '## Architecture' section"
    block = re.search(r"^```[a-z]*\n(.*?)^```", text[m.end():], re.M | re.S)
    assert block, "README's Architecture section has no code block (the tree)"
    paths = []
    for line in block.group(1).splitlines():
        if not line.strip() or line[0].isspace():
            continue   # blank, or a description's continuation
        paths.append(line.split()[0])
    return paths


def required_files():
    """Files the tree must name: the library folders' files, the top-level sources."""
    out = set()
    for name in os.listdir(ROOT):
        if os.path.isfile(os.path.join(ROOT, name)) and name.endswith((".c", ".h", ".py")):
            out.add(name)
    for folder in FOLDERS:
        top = os.path.join(ROOT, folder)
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for fn in filenames:
                if not fn.endswith(SKIP_EXT):
                    out.add(os.path.relpath(os.path.join(dirpath, fn), ROOT).replace(os.sep, "/"))
    return out


def test_tree_names_every_file():
    named = set(tree_entries(readme()))
    missing = sorted(required_files() - named)
    assert not missing, "README's architecture tree does not name: " + ", ".join(missing)


def test_tree_paths_exist():
    bad = []
    for p in tree_entries(readme()):
        full = os.path.join(ROOT, p)
        if p.endswith("/") and not os.path.isdir(full) or not p.endswith("/") and not os.path.isfile(full):
            bad.append(p)
    assert not bad, "README's architecture tree names what does not exist: " + ", ".join(bad)


def test_tree_names_each_path_once():
    paths = tree_entries(readme())
    twice = sorted({p for p in paths if paths.count(p) > 1})
    assert not twice, "README's architecture tree names these more than once: " + ", ".join(twice)
    assert len(paths) >= 20, f"README's architecture tree names only {len(paths)} paths"


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def test_links_resolve():
    for name in ("README.md", "BENCHMARKS.md"):
        path = os.path.join(ROOT, name)
        assert os.path.isfile(path), f"{name} is missing"
        with open(path, encoding="utf-8") as f:
            text = f.read()
        body = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)   # no links inside code blocks
        anchors = {slug(h) for h in re.findall(r"^#+ (.*)$", body, re.M)}
        for target in re.findall(r"\]\(([^)\s]+)\)", body):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            if file:
                assert os.path.exists(os.path.join(ROOT, file)), f"{name} links to {file}, which does not exist"
            if anchor and not file:
                assert anchor in anchors, f"{name} links to #{anchor}, which is no heading of it"
            if anchor and file.endswith(".md"):
                with open(os.path.join(ROOT, file), encoding="utf-8") as f:
                    other = {slug(h) for h in re.findall(r"^#+ (.*)$", f.read(), re.M)}
                assert anchor in other, f"{name} links to {file}#{anchor}, which is no heading there"


def test_readme_links_benchmarks():
    assert "](BENCHMARKS.md" in readme(), "README does not link to BENCHMARKS.md"


def test_setup_commands_are_ci():
    """README's quick start is `make run` then `make check`, and .ci/run's last command is that `make check`."""
    text = readme()
    m = re.search(r"^## Quick start.*?\n```sh\n(.*?)^```", text, re.M | re.S)
    assert m, "README has no Quick start code block"
    cmds = [ln.split("#")[0].strip() for ln in m.group(1).splitlines() if ln.split("#")[0].strip()]
    assert cmds == ["make run", "make check"], f"README's set-up commands: {cmds}"
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    assert ci[-1] == "make check", f".ci/run ends with {ci[-1]!r}, not README's `make check`"
