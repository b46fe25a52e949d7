import sys

from protolab.live.page import main

sys.exit(main())
