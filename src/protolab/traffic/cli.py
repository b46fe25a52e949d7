"""`protolab traffic ...`: passive traffic analysis (docs/traffic.md). A thin registry: every
module adds its own commands with `register(app)`; they print bad input as one error line and
exit with status 2."""

from __future__ import annotations

import typer

from protolab.traffic import characterize, classify, corpus, nat_corpus, parallel, synthetic, tstat

traffic_app = typer.Typer(name="traffic", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                          help="Passive traffic analysis (docs/traffic.md): flow records (Tstat import, lab "
                               "corpus, synthetic flows), their characterization, the HTTP-version classifier, "
                               "parallel connections.")

tstat.register(traffic_app)      # import-tstat
parallel.register(traffic_app)   # parallel
synthetic.register(traffic_app)  # synth
classify.register(traffic_app)   # classify train|evaluate|predict
corpus.register(traffic_app)     # corpus
characterize.register(traffic_app)  # characterize
nat_corpus.register(traffic_app)  # nat-corpus
