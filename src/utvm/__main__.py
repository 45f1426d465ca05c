import sys

from utvm.cli import main

sys.exit(main())
