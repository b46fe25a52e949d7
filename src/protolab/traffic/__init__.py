"""Passive traffic analysis (issue 11, 000 ch. 3-4): flow records from captures
(`protolab-net flows`), Tstat import, the HTTP-version classifier, the characterization of H1
vs H2 (vs H3) flows and the detection of parallel connections. `protolab traffic ...`."""
