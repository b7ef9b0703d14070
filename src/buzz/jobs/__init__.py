"""Jobs (issue 27): a party asks an agent for a unit of work in a channel and gets a structured
result back, as six signed channel events (43001–43006), plus the agent directory records
(30175–30178) that say whom an agent answers.

This package is the pure core: no I/O, no asyncio, no clock reads (callers pass `now`). It
imports `buzz.core` only, and every path that touches a job reads it: the relay's ingest rules,
the client API (`buzz.client.jobs`), the harness, the CLI and the MCP tools. One validator, one
state machine, so a producer refuses exactly what the relay would.

    limits     every number of the job protocol and the directory records
    wire       tag shapes and contents of 43001–43003, 43005, 43006 (parse and check)
    result     the NIP-AJ result document of 43004 (payload, invariants, references)
    machine    states, who may sign each kind, legal transitions, folding events to a summary
    build      event templates (kind, tags, content) a producer signs
    records    personas, teams, managed agents and catalogs: content rules and the secret ban
    redact     progress titles without local paths or URL user-info
"""
