"""External QUIC/HTTP stacks in the lab through the quic-interop-runner endpoint interface
(docs/interop.md): the test cases and how they are judged (`testcases`, pure), the QUIC packets
of a capture as tshark decodes them (`trace`, pure parser; `tcp_trace` the TCP segments of the
cases over TCP, for web servers and browsers), the stacks protolab knows
(`stacks`), what the blackhole and amplificationlimit cases do to the link while the client
runs (`links`, pure), and the private mount namespace that gives an unmodified `run_endpoint.sh` its
`/www`, `/downloads`, `/certs` and `/logs` (`endpoint`).

May import: `errors`, `files`; no stage package (the run stage's `protolab.run.interop` drives
the endpoints in a lab)."""
