import sys

from waggle.cli import main

sys.exit(main())
