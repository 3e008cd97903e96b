#!/usr/bin/env python3
"""What an op is lives in one place: the op table (core/src/op_table.h).

Fails when, outside the table, the library or a frontend restates it:
  - an op-name list: three or more op names (as string literals, "qr", 'eigh', or their
    upper-case environment forms "EIGH") in one line or one bracketed list;
  - an op-id list: `op < 5`-style bounds on a literal op count, `... = range(5)` over op ids;
  - an output-shape function: a function or method named *output_shape* / *output_floats*
    whose body branches on an op (ML_OP_*, op == / op_name comparisons with op names);
  - a flag check: the core's flag-value validations ("must be ML_...", two chained
    `flags != ML_...` comparisons).
Sources checked: core/, cpu/, cuda/, metal/, python-torch/, python-mlx/, python-shared/ (the
C/C++ and Python files); the table itself and ALLOWED lines (per-op code that is an op's own:
its reference peer, its gradient) are exempt. Usage: check_op_table.py [--self-test]
  --self-test: plants each kind of violation in a copy of the tree and requires the check to
  find it (and the clean tree to pass).
"""

import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIRS = ("core", "cpu", "cuda", "metal", "python-torch", "python-mlx", "python-shared")
SUFFIXES = {".h", ".cpp", ".cu", ".metal", ".py", ".c"}
TABLE = "core/src/op_table.h"

# (path, substring of the line): per-op code that is really that op's own, not a restated
# description of the ops. Also exempt: maps from each op name to its own implementation
# ("qr": lambda ...: a reference peer), and __all__ (the public functions are named after
# the ops).
ALLOWED: list[tuple[str, str]] = []


def op_names(tree: Path) -> list[str]:
    src = (tree / TABLE).read_text()
    names = re.findall(r'\{ML_OP_\w+,\s*"(\w+)",\s*"(\w+)"', src)
    return [n for pair in names for n in pair]


def strip_comments(text: str, python: bool) -> str:
    """Comments blanked (line structure kept), so prose about the ops is not code."""
    if python:
        out = []
        for line in text.splitlines():
            # a '#' outside a string literal (good enough: no '#' in this tree's strings)
            i = line.find("#")
            out.append(line if i < 0 or line[:i].count('"') % 2 else line[:i])
        return "\n".join(out)
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def allowed(rel: str, group: str, names: list[str]) -> bool:
    if any(rel == p and s in group for p, s in ALLOWED):
        return True
    if re.match(r"\s*__all__\s*=", group) or group.lstrip().startswith("__all__"):
        return True
    # {"qr": lambda a: ..., ...}: each op's own implementation
    alts = "|".join(names)
    lits = re.findall(rf"""["']({alts})["'](\s*:\s*lambda)?""", group)
    return bool(lits) and all(impl for _, impl in lits)


def groups(text: str):
    """(line number, text) of every line and of every bracketed list spanning lines."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        yield i + 1, line
    for m in re.finditer(r"[\[\({][^\[\]\(\){}]*[\]\)}]", text, flags=re.DOTALL):
        if "\n" in m.group(0):  # with the start of its first line (`__all__ = [`)
            start = text.rfind("\n", 0, m.start()) + 1
            yield text.count("\n", 0, m.start()) + 1, text[start : m.end()]


def check_file(rel: str, text: str, names: list[str]) -> list[str]:
    python = rel.endswith(".py")
    code = strip_comments(text, python)
    errors = []
    alts = "|".join(map(re.escape, names))
    lit = re.compile(rf"""["']({alts})["']""")
    seen = set()
    for line_no, group in groups(code):
        found = {m.group(1).lower() for m in lit.finditer(group)}
        if len(found) >= 3 and line_no not in seen and not allowed(rel, group, names):
            seen.add(line_no)
            errors.append(f"{rel}:{line_no}: an op-name list ({', '.join(sorted(found))})")
    for m in re.finditer(r"\bop\w*\s*<\s*[1-9]\d*\b|=\s*range\([1-9]\d*\)", code):
        line_no = code.count("\n", 0, m.start()) + 1
        line = code.splitlines()[line_no - 1]
        if "range(" not in m.group(0) or "OP" in line.upper():
            errors.append(f"{rel}:{line_no}: an op-id bound or list ({m.group(0).strip()})")
    # Output-shape functions that branch on the op.
    if python:
        defs = re.finditer(
            r"^(\s*)def (\w*output_(?:shape|floats)\w*)\(.*?(?=^\1\S|\Z)",
            code,
            flags=re.DOTALL | re.MULTILINE,
        )
    else:
        defs = re.finditer(
            r"\b(\w*output_(?:shape|floats)\w*)\s*\([^;{]*\)\s*(?:const\s*)?"
            r"(?:override\s*)?\{",
            code,
        )
    for m in defs:
        name = m.group(2) if python else m.group(1)
        body = m.group(0) if python else body_of(code, m.end() - 1)
        if (
            re.search(r"ML_OP_\w+|op\s*==\s*[\"']|case\s+ML_OP", body)
            or len({x.group(1) for x in lit.finditer(body)}) >= 1
        ):
            line_no = code.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line_no}: output-shape function {name} branches on the op")
    if not python:
        for m in re.finditer(
            r"must be ML_(?!MEMORY)\w+|flags\s*!=\s*ML_\w+\s*&&\s*[\w.]*flags\s*!=\s*ML_", code
        ):
            line_no = code.count("\n", 0, m.start()) + 1
            errors.append(f"{rel}:{line_no}: a flag check ({m.group(0)})")
    return errors


def body_of(code: str, brace: int) -> str:
    depth = 0
    for i in range(brace, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[brace : i + 1]
    return code[brace:]


def check(tree: Path) -> list[str]:
    names = op_names(tree)
    if len(names) < 6:
        return [f"{TABLE}: no op rows found"]
    errors = []
    for d in DIRS:
        for f in sorted((tree / d).rglob("*")):
            if f.suffix not in SUFFIXES or not f.is_file():
                continue
            rel = f.relative_to(tree).as_posix()
            if rel == TABLE:
                continue
            errors += check_file(rel, f.read_text(errors="replace"), names)
    return errors


PLANTS = [
    ("python-torch/metal_linalg_torch/_lib.py", '\nNAMES = ("qr", "eigh", "svd")\n'),
    (
        "python-mlx/src/primitive.cpp",
        '\nconst char *const kNames[] = {\n    "qr",\n    "eigvalsh",\n    "svdvals",\n};\n',
    ),
    ("core/src/routing.cpp", "\nstatic bool f(int op) { return op < 5; }\n"),
    ("python-mlx/metal_linalg/_ops.py", "\nOP_A, OP_B, OP_C, OP_D, OP_E = range(5)\n"),
    (
        "python-torch/metal_linalg_torch/_dispatch.py",
        (
            '\n\ndef planted_output_shapes(op, m, n):\n    if op == "eigvalsh":\n'
            "        return [(n,)]\n    return []\n"
        ),
    ),
    (
        "python-mlx/src/core_call.h",
        (
            "\ninline int output_shape_of(int op) {\n  switch (op) {\n    case ML_OP_QR: return 2;\n"
            "  }\n  return 0;\n}\n"
        ),
    ),
    (
        "core/src/dispatch.cpp",
        '\nstatic const char *k = "uplo must be ML_LOWER (0) or ML_UPPER (1)";\n',
    ),
    (
        "cpu/cpu_backend.cpp",
        "\nstatic bool g(int flags) { return flags != ML_LOWER && flags != ML_UPPER; }\n",
    ),
]


def self_test() -> int:
    clean = check(ROOT)
    if clean:
        print("self-test: the clean tree fails:\n  " + "\n  ".join(clean))
        return 1
    failed = 0
    for rel, text in PLANTS:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            for d in DIRS:
                shutil.copytree(ROOT / d, tree / d, ignore=shutil.ignore_patterns("build*"))
            target = tree / rel
            target.write_text(target.read_text() + text)
            found = [e for e in check(tree) if e.startswith(rel + ":")]
            if not found:
                print(f"self-test: planted violation in {rel} not found")
                failed += 1
            else:
                print(f"self-test: {found[0]}")
    if failed:
        return 1
    print(f"self-test passed ({len(PLANTS)} planted violations found, clean tree passes)")
    return 0


def main() -> int:
    if "--self-test" in sys.argv[1:]:
        return self_test()
    errors = check(ROOT)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} restatement(s) of the op table ({TABLE}); read the table instead")
        return 1
    print("op table: no restated op lists, output shapes or flag checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
