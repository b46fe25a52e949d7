"""One-command reproduction of the seeds' figures and tables (`protolab reproduce`): a
registry of figures (figures.py), the claims each is judged by (claims.py, pure), the rows
they are judged on (data.py), and the command (cli.py)."""
