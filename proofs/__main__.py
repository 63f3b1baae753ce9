import sys

from epochgc.proofs.runner import main

sys.exit(main())
