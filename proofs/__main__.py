import sys

from proofs.runner import main

sys.exit(main())
