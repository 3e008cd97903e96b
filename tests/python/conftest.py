"""Makes tests/python's shared modules (accuracy.py) importable from every suite below it."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
