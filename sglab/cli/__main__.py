import sys

from sglab.cli import main

sys.exit(main())
