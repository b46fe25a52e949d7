"""One-command reproduction of the seeds' figures and tables (`protolab reproduce`): a
registry of figures (figures/), the claims each is judged by (claims.py, pure), the rows
they are judged on (data.py), the adaptive repetitions that run until the claims decide or the
figure's budget is spent (adaptive.py), and the command (cli.py).

May import every stage below it: `plan` (the figures' specs), `run` (its command runs them the
way `protolab run` does), `store` (the rows judged); never `report`."""
