"""python -m harness.sweep {resume,status,ctl} <sweep_dir> ..."""

import sys

from harness.sweep.index import main

sys.exit(main())
