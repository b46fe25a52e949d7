"""One-command reproduction of the seeds' figures and tables (`protolab reproduce`): a
registry of figures (figures/), the claims each is judged by (claims.py, pure), the rows
they are judged on (data.py; windows.py, pure), the adaptive repetitions that run until the
claims decide or the figure's budget is spent (adaptive.py), the command (cli.py), and the
reproduction atlas (atlas.py, one HTML page over every figure; drawings.py, how each figure is
drawn).

May import every stage below it: `plan` (the figures' specs), `run` (its command runs them the
way `protolab run` does), `store` (the rows judged), and `report` for its pure plotting helpers
(`report.figures`: the atlas draws our figures the way the report does)."""
