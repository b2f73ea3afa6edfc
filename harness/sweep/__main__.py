"""python -m harness.sweep {resume,status,ctl} <sweep_dir> ..."""

import sys

from harness.sweep.commands import main

sys.exit(main())
