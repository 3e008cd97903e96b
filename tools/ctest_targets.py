"""Print the build targets that a configured build's tests need, less the tests a regex leaves out:
their programs and the libraries of the build tree they are handed. A build can then skip the
programs of tests it does not run. Read from the CTestTestfile.cmake files, so it works before the
first build.

Usage: python tools/ctest_targets.py <build dir> [<regex of tests to leave out, as ctest -E>]
"""

import os
import re
import shlex
import sys

# add_test("name" "program" "arg" ...) or, from newer CMake, add_test([=[name]=] ...).
ADD_TEST = re.compile(r'^add_test\((?:\[=\[(?P<b>.*?)\]=\]|"(?P<q>[^"]*)") (?P<args>.*)\)$')


def main() -> int:
    build = os.path.abspath(sys.argv[1])
    exclude = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    targets = set()
    found = 0
    for top, _dirs, files in os.walk(build):
        if "CTestTestfile.cmake" not in files:
            continue
        with open(os.path.join(top, "CTestTestfile.cmake")) as f:
            for line in f:
                m = ADD_TEST.match(line.strip())
                if not m:
                    continue
                found += 1
                if exclude and exclude.search(m["b"] or m["q"]):
                    continue
                args = shlex.split(m["args"].split(" _BACKTRACE_TRIPLES")[0])
                for arg in args:
                    path = os.path.abspath(arg)
                    if not path.startswith(build + os.sep) or os.path.isdir(path):
                        continue
                    name = os.path.basename(path)
                    for suffix in (".so", ".dylib"):
                        if name.endswith(suffix):
                            name = name[: -len(suffix)].removeprefix("lib")
                    targets.add(name)
    if not found:
        print(f"no tests found under {build}", file=sys.stderr)
        return 1
    print(" ".join(sorted(targets)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
