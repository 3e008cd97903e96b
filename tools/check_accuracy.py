#!/usr/bin/env python3
"""The accuracy thresholds are stated once per language, and both state the design's table.

Fails when
  - docs/design.md section 7 (the table's threshold column for eigh, svd, qr),
    tests/kernels/accuracy.h (kEigLimit, kSvdLimit, kQrLimit, kUlp) and
    tests/python/accuracy.py (THRESH, ULP) disagree, or the two files' product bounds
    (kGemmLimit, GEMM_LIMIT) do;
  - a kernel test file (tests/kernels/*.cpp, *.h other than accuracy.h) defines one of
    accuracy.h's constants again;
  - a Python test file (tests/python/**/*.py other than accuracy.py) assigns ULP, EPS, THRESH
    or a GEMM limit from a literal, or float32's epsilon from torch / numpy.
Usage: check_accuracy.py [--self-test]
  --self-test: plants each kind of violation in a copy of the files and requires the check to
  find it (and the clean copy to pass).
"""

import ast
import operator
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = "docs/design.md"
CPP = "tests/kernels/accuracy.h"
PY = "tests/python/accuracy.py"
OPS = {"eigh": ("kEigLimit", "eig"), "svd": ("kSvdLimit", "svd"), "qr": ("kQrLimit", "qr")}
CPP_NAMES = r"k(?:Qr|Eig|Svd|Gemm)Limit|kUlp"
PY_ASSIGN = re.compile(
    r"^\s*(?:ULP|EPS|THRESH|(?:GEMM_)?LIMIT)\s*=\s*(?:[\d{(]|2\.0)"
    r"|^\s*\w+\s*=\s*.*finfo\((?:torch|np)\.float32\)\.eps",
    re.MULTILINE,
)


_OPS = {ast.Pow: operator.pow, ast.Mult: operator.mul, ast.Add: operator.add}


def _value(node):
    """A constant expression of accuracy.py: numbers, - x, x ** y, x * y, x + y, dicts."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    raise ValueError(f"{PY}: not a constant: {ast.unparse(node)}")


def py_constants(src: str) -> dict:
    out = {}
    for node in ast.parse(src).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            out[node.targets[0].id] = _value(node.value)
    return out


def design_table(tree: Path) -> dict[str, float]:
    text = (tree / DESIGN).read_text()
    sec = re.search(r"^## 7\. Accuracy$(.*?)^## ", text, re.MULTILINE | re.DOTALL)
    if not sec:
        raise ValueError(f"{DESIGN}: no section '## 7. Accuracy'")
    out = {}
    for line in sec.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in OPS:
            out[cells[0]] = float(cells[2])
    if set(out) != set(OPS):
        raise ValueError(f"{DESIGN}: the accuracy table lacks {sorted(set(OPS) - set(out))}")
    return out


def check(tree: Path) -> list[str]:
    errs = []
    try:
        want = design_table(tree)
    except ValueError as e:
        return [str(e)]
    cpp = (tree / CPP).read_text()
    cvals = {m[0]: float(m[1]) for m in re.findall(r"constexpr double (\w+) = ([\d.e+-]+);", cpp)}
    try:
        env = py_constants((tree / PY).read_text())
    except ValueError as e:
        return [str(e)]
    for op, (cname, pykey) in OPS.items():
        if cvals.get(cname) != want[op]:
            errs.append(f"{CPP}: {cname} = {cvals.get(cname)}, {DESIGN} says {want[op]}")
        got = env.get("THRESH", {}).get(pykey)
        if got != want[op]:
            errs.append(f"{PY}: THRESH['{pykey}'] = {got}, {DESIGN} says {want[op]}")
    ulp = 2.0**-23
    if cvals.get("kUlp") != ulp:
        errs.append(f"{CPP}: kUlp = {cvals.get('kUlp')}, not float32 epsilon")
    if cvals.get("kGemmLimit") is None or cvals.get("kGemmLimit") != env.get("GEMM_LIMIT"):
        errs.append(
            f"{CPP}: kGemmLimit = {cvals.get('kGemmLimit')}, "
            f"{PY}: GEMM_LIMIT = {env.get('GEMM_LIMIT')}"
        )
    if env.get("ULP") != ulp:
        errs.append(f"{PY}: ULP = {env.get('ULP')}, not float32 epsilon")
    for f in sorted((tree / "tests/kernels").iterdir()):
        if f.suffix not in (".cpp", ".h") or f.name == "accuracy.h":
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(rf"constexpr double (?:{CPP_NAMES})\b\s*=", line):
                errs.append(f"tests/kernels/{f.name}:{i}: restates {CPP}: {line.strip()}")
    for f in sorted((tree / "tests/python").rglob("*.py")):
        rel = f.relative_to(tree).as_posix()
        if rel == PY:
            continue
        for m in PY_ASSIGN.finditer(f.read_text()):
            errs.append(f"{rel}: restates {PY}: {m.group(0).strip()}")
    return errs


def self_test() -> int:
    if errs := check(ROOT):
        print("check_accuracy self-test: the clean tree fails:", *errs, sep="\n  ")
        return 1
    plants = [
        (DESIGN, "| 30 |", "| 31 |", "design table vs headers"),
        (CPP, "kSvdLimit = 35;", "kSvdLimit = 36;", "C++ header drift"),
        (PY, '"eig": 60.0', '"eig": 61.0', "Python module drift"),
        (
            "tests/kernels/test_blocked.cpp",
            "namespace {\n",
            "namespace {\nconstexpr double kQrLimit = 30;\n",
            "C++ restatement",
        ),
        ("tests/python/torch/_matrices.py", "\n", "\nEPS = 2.0**-23\n", "Python restatement"),
        (
            "tests/python/torch/_matrices.py",
            "\n",
            "\neps = torch.finfo(torch.float32).eps\n",
            "Python epsilon from torch",
        ),
    ]
    bad = 0
    for path, old, new, what in plants:
        with tempfile.TemporaryDirectory() as d:
            tree = Path(d)
            for part in (DESIGN, "tests/kernels", "tests/python"):
                src = ROOT / part
                if src.is_dir():
                    shutil.copytree(src, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    (tree / part).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(src, tree / part)
            f = tree / path
            text = f.read_text()
            if old not in text:
                print(f"check_accuracy self-test: cannot plant '{what}' in {path}")
                bad += 1
                continue
            f.write_text(text.replace(old, new, 1))
            caught = bool(check(tree))
            print(
                f"check_accuracy self-test: planted '{what}' {'caught' if caught else 'NOT caught'}"
            )
            bad += not caught
    return 1 if bad else 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if errs := check(ROOT):
        print("check_accuracy: FAIL", *errs, sep="\n  ")
        return 1
    print("check_accuracy: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
