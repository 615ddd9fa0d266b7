"""``python -m kubelet_trio``."""

import sys

from kubelet_trio.cli import main

sys.exit(main())
