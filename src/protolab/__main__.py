from protolab.cli import app

app(prog_name="protolab")
