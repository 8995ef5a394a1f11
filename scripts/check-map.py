#!/usr/bin/env python3
"""Checks that docs/ARCHITECTURE.md is a current map of the code.

Every crate under crates/ has a section headed "### `crates/NAME`"; in it, every module
the crate has as a file (src/a/b.rs or src/a/b/mod.rs is `a::b`; lib.rs, main.rs and
test-only modules are not counted) is the first backticked token of a bullet line
("- `a::b` ..."), alone or in a brace group ("- `a::{b, c}`"). And every such bullet
entry names a module that exists. Exits 1 with what is missing or stale.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "ARCHITECTURE.md"
SNAKE = r"[a-z_][a-z0-9_]*"
ENTRY = re.compile(r"^\s*- `(" + SNAKE + r"(?:::" + SNAKE + r")*(?:::\{[^}`]*\})?)`")


def test_only(path: Path) -> bool:
    """A module whose declaration in its parent is under #[cfg(test)]."""
    name = path.stem if path.name != "mod.rs" else path.parent.name
    if name == "tests":
        return True
    parent_dir = path.parent if path.name != "mod.rs" else path.parent.parent
    for candidate in (parent_dir / "mod.rs", parent_dir / "lib.rs", parent_dir / "main.rs",
                      parent_dir.with_suffix(".rs")):
        if candidate.exists() and candidate != path:
            text = candidate.read_text()
            if re.search(r"#\[cfg\(test\)\]\s*(pub(\([a-z]+\))? )?mod " + re.escape(name) + r"\s*;", text):
                return True
    return False


def modules(crate: Path) -> set[str]:
    src = crate / "src"
    out = set()
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src)
        if rel.name in ("lib.rs", "main.rs") and len(rel.parts) == 1:
            continue
        if test_only(f):
            continue
        parts = list(rel.parts)
        if parts[-1] == "mod.rs":
            parts = parts[:-1]
        else:
            parts[-1] = parts[-1][:-3]
        out.add("::".join(parts))
    return out


def expand(token: str) -> list[str]:
    m = re.match(r"^(.*)::\{(.*)\}$", token)
    if not m:
        return [token]
    return [m.group(1) + "::" + x.strip() for x in m.group(2).split(",") if x.strip()]


def sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        h = re.match(r"^### `crates/([a-z0-9_-]+)`", line)
        if h:
            current = h.group(1)
            out[current] = []
            continue
        if line.startswith("## ") or line.startswith("### "):
            current = None
            continue
        if current is not None:
            out[current].append(line)
    return out


def main() -> int:
    text = MAP.read_text()
    secs = sections(text)
    problems = []
    for crate in sorted(p for p in (ROOT / "crates").iterdir() if (p / "Cargo.toml").exists()):
        name = crate.name
        if name not in secs:
            problems.append(f"crate crates/{name} has no section '### `crates/{name}`'")
            continue
        entries = set()
        for line in secs[name]:
            m = ENTRY.match(line)
            if m:
                entries.update(expand(m.group(1)))
        have = modules(crate)
        for m in sorted(have - entries):
            problems.append(f"crates/{name}: module `{m}` is not on the map")
        for m in sorted(entries - have):
            problems.append(f"crates/{name}: the map names `{m}`, which the code does not have")
    for name in sorted(set(secs) - {p.name for p in (ROOT / "crates").iterdir()}):
        problems.append(f"the map has a section for crates/{name}, which does not exist")
    for p in problems:
        print(p)
    if problems:
        print(f"{MAP.relative_to(ROOT)} is not current: {len(problems)} problem(s)")
        return 1
    print(f"{MAP.relative_to(ROOT)}: every crate and file module is on the map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
